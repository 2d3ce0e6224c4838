"""`otlp` and `otlp_http` exporters: push over the OpenTelemetry protocol."""

from otelgpu.exporters.otlp.encode import encode
from otelgpu.exporters.otlp.factory import factory, http_factory

__all__ = ["encode", "factory", "http_factory"]
