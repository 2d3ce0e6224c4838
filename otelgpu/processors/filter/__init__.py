"""`filter` processor: keep or drop metrics by name glob."""

from otelgpu.processors.filter.factory import factory

__all__ = ["factory"]
