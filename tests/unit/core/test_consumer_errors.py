"""Every consumer boundary counts a raising consumer, logs it (rate-limited) and goes on.

The defect: with one exporter in a pipeline there was no fan-out guard, and the scrape
controller called `consume` outside its try, so one exception ended the receiver's scrape
task for good, silently.
"""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.component import Host, Kind, Settings, Stability
from otelgpu.component.consumer import GuardedConsumer
from otelgpu.component.registry import Factory, Registry
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.config.types import StrictModel
from otelgpu.pdata.model import Batch
from otelgpu.service.service import Service
from tests.components import SampleReceiver, SampleReceiverConfig, core_registry
from tests.conftest import make_settings
from tests.fakes import FakeClock, telemetry_points

FAILED = "otelgpu_consumer_failed_points_total"


class RaisingConfig(StrictModel):
    pass


class RaisingExporter:
    """An exporter with a bug: every consume raises."""

    def __init__(self, settings: Settings, config: RaisingConfig) -> None:
        self.calls = 0

    async def start(self, host: Host) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    async def consume(self, batch: Batch) -> None:
        self.calls += 1
        raise KeyError("bug in the exporter")


raising = Factory(
    type="raising",
    kind=Kind.EXPORTER,
    stability=Stability.DEVELOPMENT,
    config_type=RaisingConfig,
    create=RaisingExporter,
)

ONE_EXPORTER = """\
receivers:
  sample: {interval: 10s}
exporters:
  raising:
service:
  pipelines:
    metrics:
      receivers: [sample]
      exporters: [raising]
"""


async def test_a_lone_raising_exporter_does_not_kill_the_scrape_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry([*core_registry(), raising])
    config = validate(load([("p.yaml", ONE_EXPORTER)], environ={}), registry)
    service = Service(config, registry, SelfTelemetry())
    await service.start()
    assert service.graph is not None
    receiver = next(iter(service.graph.receivers.values()))
    exporter = next(iter(service.graph.exporters.values()))
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        for _ in range(3):
            await receiver.controller.scrape_once()  # type: ignore[attr-defined]
    await service.shutdown()
    # three scrapes here, and maybe the scrape loop's first one: every one reached the exporter
    calls = receiver.cycles  # type: ignore[attr-defined]
    assert calls >= 3 and exporter.calls == calls  # type: ignore[attr-defined]
    assert telemetry_points(service.telemetry, FAILED) == {(("consumer", "raising"),): 4 * calls}
    failures = [
        r for r in caplog.records if "raising" in r.getMessage() and "failed" in r.getMessage()
    ]
    assert len(failures) == 1  # logged once, not per batch
    assert "KeyError" in failures[0].getMessage()


async def test_the_scrape_task_survives_a_raising_next_consumer(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """The controller itself is a boundary: even an unguarded `next` cannot end its loop."""
    exporter = RaisingExporter(make_settings("raising", Kind.EXPORTER, telemetry), RaisingConfig())
    receiver = SampleReceiver(
        make_settings("sample", Kind.RECEIVER, telemetry),
        SampleReceiverConfig.model_validate({"interval": "10s"}),
        exporter,
        clock=clock,
    )
    await receiver.start(None)  # type: ignore[arg-type]
    await clock.advance(0)
    await clock.advance(10)
    await clock.advance(10)
    assert receiver.cycles == 3 and exporter.calls == 3
    assert telemetry_points(telemetry, FAILED) == {(("consumer", "downstream of sample"),): 12}
    await receiver.shutdown()


async def test_guard_logs_again_after_the_interval_with_the_suppressed_count(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    now = [100.0]
    exporter = RaisingExporter(make_settings("raising", Kind.EXPORTER, telemetry), RaisingConfig())
    guard = GuardedConsumer("raising", exporter, telemetry, monotonic=lambda: now[0])
    data = await SampleReceiver(
        make_settings("sample", Kind.RECEIVER, telemetry), SampleReceiverConfig(), exporter
    ).scrape()
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        for _ in range(5):
            await guard.consume(data)
        now[0] += 61
        await guard.consume(data)
    lines = [r.getMessage() for r in caplog.records if "raising" in r.getMessage()]
    assert len(lines) == 2
    assert "4 more since" in lines[1]
    assert telemetry_points(telemetry, FAILED) == {(("consumer", "raising"),): 24}
