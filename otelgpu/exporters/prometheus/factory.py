"""Factory of the `prometheus` exporter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig

if TYPE_CHECKING:
    from otelgpu.exporters.prometheus.exporter import PrometheusExporter


def _create(settings: Settings, config: PrometheusExporterConfig) -> PrometheusExporter:
    # Imported here: validating a config needs only the config model, not the HTTP server.
    from otelgpu.exporters.prometheus.exporter import PrometheusExporter

    return PrometheusExporter(settings, config)


factory = Factory(
    type="prometheus",
    kind=Kind.EXPORTER,
    stability=Stability.BETA,
    config_type=PrometheusExporterConfig,
    create=_create,
    description="serves /metrics for Prometheus to scrape (otel or dcgm-exporter naming)",
)
