"""`health_check` extension: `/healthz` (alive) and `/readyz` (ready) over HTTP."""

from otelgpu.extensions.health_check.factory import factory

__all__ = ["factory"]
