"""The exporter's parts as a pipeline that reads the nvml receiver builds them: with the naming
table of the nvml receiver (`Factory.naming`), which the service hands to exporters."""

from __future__ import annotations

from typing import Any

from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.receivers.nvml.dcgm_names import NAMING


def make_translator(naming: str, **options: Any) -> Translator:
    """A Translator in `naming` (`otel` or `dcgm`), no const labels unless given."""
    const = options.pop("const_labels", {})
    return Translator(naming, const, names=NAMING, **options)  # type: ignore[arg-type]


def nvml_settings(id: str, kind: Kind, telemetry: SelfTelemetry) -> Settings:
    """Settings for a component under test, in a config that uses the nvml receiver."""
    return Settings.for_component(ComponentID.parse(id), kind, telemetry, naming=NAMING)
