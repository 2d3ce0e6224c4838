"""Factory of the `prometheus` exporter."""

from __future__ import annotations

from otelgpu.component import Kind, Settings, Stability
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.registry import Factory


def _create(settings: Settings, config: PrometheusExporterConfig) -> PrometheusExporter:
    return PrometheusExporter(settings, config)


factory = Factory(
    type="prometheus",
    kind=Kind.EXPORTER,
    stability=Stability.BETA,
    config_type=PrometheusExporterConfig,
    create=_create,
    description="serves /metrics for Prometheus to scrape (otel or dcgm-exporter naming)",
)
