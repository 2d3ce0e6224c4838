"""A tiny receiver for core tests: deterministic points, no outside peer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from otelgpu.component.clock import Clock
from otelgpu.component.component import Host, Kind, MetricsConsumer, Settings, Stability
from otelgpu.component.registry import Factory, Registry
from otelgpu.config.types import PositiveDuration, StrictModel
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.scraperhelper.scraper import ScrapeController
from otelgpu.service.builtins import builtin_factories


class SampleReceiverConfig(StrictModel):
    """`receivers::sample`: `series` resources, each with two metrics, every `interval`."""

    interval: PositiveDuration = 1.0
    series: int = Field(default=2, ge=1)
    mode: Literal["steady", "ramp"] = "steady"
    tags: list[str] = Field(default_factory=list)


class SampleReceiver:
    """Emits `sample.value` (gauge) and `sample.count` (sum) per series, counting cycles."""

    def __init__(
        self,
        settings: Settings,
        config: SampleReceiverConfig,
        next: MetricsConsumer,
        clock: Clock | None = None,
    ) -> None:
        self.cycles = 0
        self._config = config
        self.controller = ScrapeController(
            settings=settings, scrape=self.scrape, next=next, interval=config.interval, clock=clock
        )

    async def start(self, host: Host) -> None:
        await self.controller.start()

    async def shutdown(self) -> None:
        await self.controller.shutdown()

    async def scrape(self) -> Batch:
        self.cycles += 1
        step = self.cycles if self._config.mode == "ramp" else 1
        return tuple(
            ResourceMetrics(
                resource={"hw.id": f"GPU-{i}", "tags": ",".join(self._config.tags)},
                metrics=(
                    _metric("sample.value", MetricKind.GAUGE, float(i * step), {"kind": "a"}),
                    _metric("sample.count", MetricKind.SUM, self.cycles, {}),
                ),
            )
            for i in range(self._config.series)
        )


def _metric(name: str, kind: MetricKind, value: float, attrs: dict[str, str]) -> Metric:
    point = NumberDataPoint(attributes=attrs, time_unix_nano=1, value=value, start_time_unix_nano=0)
    return Metric(
        name=name,
        unit="1",
        description=name,
        kind=kind,
        points=(point,),
        monotonic=kind is MetricKind.SUM,
    )


sample_factory = Factory(
    type="sample",
    kind=Kind.RECEIVER,
    stability=Stability.DEVELOPMENT,
    config_type=SampleReceiverConfig,
    create=SampleReceiver,
    description="test-only deterministic receiver",
)

_CORE_TYPES = {"debug", "filter", "attributes", "resource", "health_check"}


def core_registry() -> Registry:
    """The peerless built-ins plus `sample`: a registry whose type list never changes, so the
    bad-config suite's exact messages stay stable as components are added to the agent."""
    core = [f for f in builtin_factories() if f.type in _CORE_TYPES]
    return Registry([*core, sample_factory])
