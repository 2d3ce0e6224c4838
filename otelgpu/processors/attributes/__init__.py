"""`attributes` processor: insert, update, upsert, delete or rename data point attributes."""

from otelgpu.processors.attributes.factory import factory

__all__ = ["factory"]
