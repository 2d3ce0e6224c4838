"""Factory and core of the `filter` processor."""

from __future__ import annotations

from dataclasses import replace

from otelgpu.component.component import Kind, Settings, Stability, Stateless
from otelgpu.component.registry import Factory
from otelgpu.pdata.model import Batch
from otelgpu.processors.filter.config import FilterProcessorConfig


class FilterProcessor(Stateless):
    """Keeps the metrics the filter allows; drops resources left with none.

    Decisions are cached per metric name: the set of names is small and fixed.
    """

    def __init__(self, settings: Settings, config: FilterProcessorConfig) -> None:
        self._settings = settings
        self._names = config.metrics
        self._decisions: dict[str, bool] = {}

    def keeps(self, name: str) -> bool:
        """Whether the metric `name` passes."""
        decision = self._decisions.get(name)
        if decision is None:
            decision = self._names.included(name) and not self._names.excluded(name)
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
            processor=str(self._settings.id),
        )
        return tuple(out)


factory = Factory(
    type="filter",
    kind=Kind.PROCESSOR,
    stability=Stability.BETA,
    config_type=FilterProcessorConfig,
    create=FilterProcessor,
    description="keep or drop metrics by name glob",
)

__all__ = ["FilterProcessor", "FilterProcessorConfig", "factory"]
