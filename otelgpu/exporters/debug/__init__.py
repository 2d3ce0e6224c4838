"""`debug` exporter: prints what passes through a pipeline."""

from otelgpu.exporters.debug.factory import factory

__all__ = ["factory"]
