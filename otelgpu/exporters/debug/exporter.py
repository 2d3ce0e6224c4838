"""The `debug` exporter: writes batches to the agent's log, for a human to read."""

from __future__ import annotations

import json

from otelgpu.component import Settings, Stateless
from otelgpu.exporters.debug.config import DebugExporterConfig
from otelgpu.model import Attributes, Batch, point_count


class DebugExporter(Stateless):
    """Logs each batch at INFO on `otelgpu.exporter.<id>`; never fails."""

    def __init__(self, settings: Settings, config: DebugExporterConfig) -> None:
        self._settings = settings
        self._config = config

    async def consume(self, batch: Batch) -> None:
        log = self._settings.logger
        n = point_count(batch)
        metrics = sum(len(rm.metrics) for rm in batch)
        log.info("batch: %d resources, %d metrics, %d points", len(batch), metrics, n)
        if self._config.verbosity == "detailed":
            for line in render(batch):
                log.info("%s", line)
        self._settings.telemetry.exporter_result(str(self._settings.id), n, 0)


def render(batch: Batch) -> list[str]:
    """The detailed text of a batch: a resource line, then one line per point, attributes as
    JSON: `  hw.gpu.utilization{"hw.gpu.task": "general"} = 0.5 1 (gauge)`."""
    lines = []
    for rm in batch:
        lines.append("resource " + _attrs(rm.resource))
        for metric in rm.metrics:
            for p in metric.points:
                unit = f" {metric.unit}" if metric.unit else ""
                lines.append(
                    f"  {metric.name}{_attrs(p.attributes)} = {p.value}{unit} ({metric.kind.value})"
                )
    return lines


def _attrs(attributes: Attributes) -> str:
    """Attributes as one JSON object, keys sorted: what `jq` and log pipelines can read (a
    value JSON cannot hold, such as bytes, is written as its text)."""
    return json.dumps(dict(sorted(attributes.items())), default=str, ensure_ascii=False)
