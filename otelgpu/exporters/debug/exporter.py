"""The `debug` exporter: writes batches to the agent's log, for a human to read."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from otelgpu.component.component import Settings, Stateless
from otelgpu.exporters.debug.config import DebugExporterConfig
from otelgpu.pdata.model import Attributes, Batch, point_count


class DebugExporter(Stateless):
    """Logs each batch at INFO on `otelgpu.exporter.<id>` (or prints it); never fails."""

    def __init__(
        self,
        settings: Settings,
        config: DebugExporterConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._config = config
        self._sampler = Sampler(config.sampling_initial, config.sampling_thereafter, clock)

    async def consume(self, batch: Batch) -> None:
        n = point_count(batch)
        if self._sampler.admits():
            metrics = sum(len(rm.metrics) for rm in batch)
            self._write(f"batch: {len(batch)} resources, {metrics} metrics, {n} points")
            if self._config.verbosity != "basic":
                for line in render(batch, detailed=self._config.verbosity == "detailed"):
                    self._write(line)
        self._settings.telemetry.exporter_result(str(self._settings.id), n, 0)

    def _write(self, line: str) -> None:
        if self._config.use_internal_logger:
            self._settings.logger.info("%s", line)
        else:
            print(line, file=sys.stdout, flush=True)


class Sampler:
    """Zap's sampler, per batch: in each second the first `initial` pass, then every
    `thereafter`-th."""

    def __init__(self, initial: int, thereafter: int, clock: Callable[[], float]) -> None:
        self._initial, self._thereafter, self._clock = initial, thereafter, clock
        self._second, self._count = -1, 0

    def admits(self) -> bool:
        second = int(self._clock())
        if second != self._second:
            self._second, self._count = second, 0
        self._count += 1
        if self._count <= self._initial:
            return True
        return (self._count - self._initial) % self._thereafter == 0


def render(batch: Batch, *, detailed: bool) -> list[str]:
    """The text of a batch, attributes as JSON: a `resource {...}` line per resource, then
    one line per point (`  hw.gpu.utilization{"hw.gpu.task": "general"} = 0.5 1 (gauge)`;
    without the unit and kind unless detailed)."""
    lines = []
    for rm in batch:
        lines.append("resource " + _attrs(rm.resource))
        for metric in rm.metrics:
            for p in metric.points:
                if not detailed:
                    lines.append(f"  {metric.name}{_attrs(p.attributes)} = {p.value}")
                    continue
                unit = f" {metric.unit}" if metric.unit else ""
                lines.append(
                    f"  {metric.name}{_attrs(p.attributes)} = {p.value}{unit} ({metric.kind.value})"
                )
    return lines


def _attrs(attributes: Attributes) -> str:
    """Attributes as one JSON object, keys sorted: what `jq` and log pipelines can read (a
    value JSON cannot hold, such as bytes, is written as its text)."""
    return json.dumps(dict(sorted(attributes.items())), default=str, ensure_ascii=False)
