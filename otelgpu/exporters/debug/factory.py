"""Factory of the `debug` exporter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.exporters.debug.config import DebugExporterConfig

if TYPE_CHECKING:
    from otelgpu.exporters.debug.exporter import DebugExporter


def _create(settings: Settings, config: DebugExporterConfig) -> DebugExporter:
    # Imported here: validating a config needs only the config model.
    from otelgpu.exporters.debug.exporter import DebugExporter

    return DebugExporter(settings, config)


factory = Factory(
    type="debug",
    kind=Kind.EXPORTER,
    stability=Stability.BETA,
    config_type=DebugExporterConfig,
    create=_create,
    description="prints what passes through a pipeline",
)
