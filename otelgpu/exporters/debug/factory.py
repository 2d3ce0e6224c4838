"""Factory of the `debug` exporter."""

from __future__ import annotations

from otelgpu.component import Kind, Settings, Stability
from otelgpu.exporters.debug.config import DebugExporterConfig
from otelgpu.exporters.debug.exporter import DebugExporter
from otelgpu.registry import Factory


def _create(settings: Settings, config: DebugExporterConfig) -> DebugExporter:
    return DebugExporter(settings, config)


factory = Factory(
    type="debug",
    kind=Kind.EXPORTER,
    stability=Stability.BETA,
    config_type=DebugExporterConfig,
    create=_create,
    description="prints what passes through a pipeline",
)
