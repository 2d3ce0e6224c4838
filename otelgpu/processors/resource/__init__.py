"""`resource` processor: insert, update, upsert, delete or rename resource attributes."""

from otelgpu.processors.resource.factory import factory

__all__ = ["factory"]
