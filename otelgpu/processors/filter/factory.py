"""Factory, config and core of the `filter` processor (small enough for one module)."""

from __future__ import annotations

import fnmatch
from dataclasses import replace

from pydantic import Field

from otelgpu.component import Kind, Settings, Stability, Stateless
from otelgpu.config.types import StrictModel
from otelgpu.model import Batch
from otelgpu.registry import Factory


class MetricNameFilter(StrictModel):
    """Metric name globs. An empty `include` keeps every metric `exclude` does not drop."""

    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


class FilterProcessorConfig(StrictModel):
    """`processors::filter`: `metrics: {include: [...], exclude: [...]}`."""

    metrics: MetricNameFilter = Field(default_factory=MetricNameFilter)


class FilterProcessor(Stateless):
    """Keeps the metrics the filter allows; drops resources left with none.

    Decisions are cached per metric name: the set of names is small and fixed.
    """

    def __init__(self, settings: Settings, config: FilterProcessorConfig) -> None:
        self._settings = settings
        self._include = tuple(config.metrics.include)
        self._exclude = tuple(config.metrics.exclude)
        self._decisions: dict[str, bool] = {}

    def keeps(self, name: str) -> bool:
        """Whether the metric `name` passes."""
        decision = self._decisions.get(name)
        if decision is None:
            included = not self._include or _any_match(name, self._include)
            decision = included and not _any_match(name, self._exclude)
            self._decisions[name] = decision
        return decision

    def process(self, batch: Batch) -> Batch:
        out = []
        dropped = 0
        for rm in batch:
            metrics = tuple(m for m in rm.metrics if self.keeps(m.name))
            if len(metrics) == len(rm.metrics):
                out.append(rm)
                continue
            dropped += sum(len(m.points) for m in rm.metrics if not self.keeps(m.name))
            if metrics:
                out.append(replace(rm, metrics=metrics))
        self._settings.telemetry.count(
            "otelgpu_processor_filtered_points_total",
            dropped,
            "Points a filter processor dropped on purpose",
            processor=str(self._settings.id),
        )
        return tuple(out)


def _any_match(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


factory = Factory(
    type="filter",
    kind=Kind.PROCESSOR,
    stability=Stability.BETA,
    config_type=FilterProcessorConfig,
    create=FilterProcessor,
    description="keep or drop metrics by name glob",
)
