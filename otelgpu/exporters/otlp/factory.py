"""Factories of the `otlp` (gRPC) and `otlp_http` exporters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.exporters.otlp.config import OtlpExporterConfig, OtlpHttpExporterConfig

if TYPE_CHECKING:
    from otelgpu.exporters.otlp.exporter import OtlpExporter

# The transports are imported by the factory that needs them: a gRPC exporter does not load
# the HTTP client stack (aiohttp), an HTTP one does not load grpc, and validating a config
# loads neither.


def _create_grpc(settings: Settings, config: OtlpExporterConfig) -> OtlpExporter:
    from otelgpu.exporters.otlp.exporter import OtlpExporter
    from otelgpu.exporters.otlp.grpc_client import GrpcTransport

    return OtlpExporter(settings, config, GrpcTransport(config))


def _create_http(settings: Settings, config: OtlpHttpExporterConfig) -> OtlpExporter:
    from otelgpu.exporters.otlp.exporter import OtlpExporter
    from otelgpu.exporters.otlp.http_client import HttpTransport

    return OtlpExporter(settings, config, HttpTransport(config))


factory = Factory(
    type="otlp",
    kind=Kind.EXPORTER,
    stability=Stability.BETA,
    config_type=OtlpExporterConfig,
    create=_create_grpc,
    description="pushes metrics over OTLP/gRPC",
)

http_factory = Factory(
    type="otlp_http",
    kind=Kind.EXPORTER,
    stability=Stability.BETA,
    config_type=OtlpHttpExporterConfig,
    create=_create_http,
    description="pushes metrics over OTLP/HTTP (binary protobuf)",
)
