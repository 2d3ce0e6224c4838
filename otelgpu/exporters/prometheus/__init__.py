"""`prometheus` exporter: serves the pipeline's latest points at `/metrics`."""

from otelgpu.exporters.prometheus.factory import factory

__all__ = ["factory"]
