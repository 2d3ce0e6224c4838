"""The scrape controller: on time, bounded, counted, never dying; driven by a fake clock."""

from __future__ import annotations

import asyncio

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch
from otelgpu.scraperhelper.scraper import ScrapeController
from tests.components import SampleReceiver, SampleReceiverConfig
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink


def _values(telemetry: SelfTelemetry, name: str) -> dict[tuple[tuple[str, object], ...], float]:
    out = {}
    for metric in telemetry.collect().metrics:
        if metric.name == name:
            for p in metric.points:
                out[tuple(sorted(p.attributes.items()))] = p.value
    return out


async def test_scrapes_every_interval_and_counts_points(
    telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> None:
    settings = make_settings("sample", Kind.RECEIVER, telemetry)
    receiver = SampleReceiver(
        settings,
        SampleReceiverConfig.model_validate({"interval": "10s", "series": 3}),
        sink,
        clock=clock,
    )
    await receiver.start(None)  # type: ignore[arg-type]
    await clock.advance(0)
    assert receiver.cycles == 1
    await clock.advance(9.9)
    assert receiver.cycles == 1
    await clock.advance(0.1)
    await clock.advance(10)
    assert receiver.cycles == 3
    await receiver.shutdown()
    await receiver.shutdown()  # idempotent
    assert len(sink.batches) == 3
    assert _values(telemetry, "otelgpu_receiver_points_total") == {(("receiver", "sample"),): 18}
    assert (("receiver", "sample"),) in _values(telemetry, "otelgpu_collection_duration_seconds")


async def test_a_failing_or_hanging_scrape_is_counted_and_the_loop_goes_on(
    telemetry: SelfTelemetry, sink: Sink
) -> None:
    calls = 0

    async def scrape() -> Batch:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("NVML said no")
        if calls == 2:
            await asyncio.sleep(10)  # longer than the timeout
        return ()

    settings = make_settings("flaky", Kind.RECEIVER, telemetry)
    controller = ScrapeController(
        settings=settings, scrape=scrape, next=sink, interval=1.0, timeout=0.01
    )
    for _ in range(3):
        await controller.scrape_once()
    assert calls == 3
    assert _values(telemetry, "otelgpu_receiver_scrape_errors_total") == {
        (("receiver", "flaky"),): 2
    }


async def test_a_slow_cycle_skips_missed_ticks_instead_of_bursting(
    telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> None:
    times: list[float] = []

    async def scrape() -> Batch:
        times.append(clock.monotonic())
        if len(times) == 1:
            clock.now += 35  # the first scrape took 3.5 intervals
        return ()

    settings = make_settings("slow", Kind.RECEIVER, telemetry)
    controller = ScrapeController(
        settings=settings, scrape=scrape, next=sink, interval=10.0, clock=clock
    )
    await controller.start()
    await clock.advance(0)
    await clock.advance(10)
    await controller.shutdown()
    assert times == [1000.0, 1040.0]  # next tick on the original phase, no burst of 3
