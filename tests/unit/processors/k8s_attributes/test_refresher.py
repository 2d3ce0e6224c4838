"""The refresher's schedule (refresher.py) on a clock moved by hand: when the kubelet is asked,
which back-off follows a failed first attempt, when a kubelet that never answers is given up on
and what is then reported, and how refreshes are counted."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.k8s_attributes.pod_resources import (
    DeviceAllocation,
    PodAllocation,
    PodResourcesError,
)
from otelgpu.processors.k8s_attributes.refresher import SnapshotRefresher
from tests.conftest import make_settings
from tests.fakes import FakeClock
from tests.unit.processors.k8s_attributes.fakes import series

START = 1000.0  # the fake clock's start
ERRORS = "otelgpu_pod_resources_errors_total"
REFRESHES = "otelgpu_pod_resources_refreshes_total"


class FixedJitter(random.Random):
    """Always the same point of the jitter's range: 0.25 of ±20 % is a factor of 0.9."""

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * 0.25


class Kubelet:
    """A PodResourcesClient that notes when it is asked, and answers, fails or never answers."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.asked: list[float] = []  # seconds after the start
        self.error: PodResourcesError | None = None
        self.silent = False

    async def list(self) -> tuple[PodAllocation, ...]:
        self.asked.append(self.clock.monotonic() - START)
        if self.silent:
            await asyncio.get_running_loop().create_future()  # no answer, ever
        if self.error is not None:
            raise self.error
        return ()

    async def allocatable(self) -> tuple[DeviceAllocation, ...] | None:
        return None

    async def close(self) -> None:
        pass


async def on_answer(pods: tuple[PodAllocation, ...], devices: object) -> None:
    pass


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def kubelet(clock: FakeClock) -> Kubelet:
    return Kubelet(clock)


@asynccontextmanager
async def running(
    telemetry: SelfTelemetry, kubelet: Kubelet, clock: FakeClock, *, interval: float
) -> AsyncIterator[SnapshotRefresher]:
    refresher = SnapshotRefresher(
        settings=make_settings("k8s_attributes", Kind.PROCESSOR, telemetry),
        client=kubelet,
        on_answer=on_answer,
        interval=interval,
        timeout=5.0,
        clock=clock,
        rng=FixedJitter(),
    )
    task = asyncio.create_task(refresher.run())
    try:
        yield refresher
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@contextmanager
def loop_time_follows(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The event loop's own clock (what `asyncio.timeout` reads) made the hand-moved one."""
    with monkeypatch.context() as patch:
        patch.setattr(asyncio.get_running_loop(), "time", clock.monotonic)
        yield


async def test_a_healthy_kubelet_is_asked_every_interval_even_a_fractional_one(
    telemetry, kubelet, clock
):
    async with running(telemetry, kubelet, clock, interval=2.5):
        await clock.advance(8)
    assert kubelet.asked == [0.0, 2.5, 5.0, 7.5]


async def test_a_kubelet_down_from_the_start_is_retried_after_one_second_then_doubling(
    telemetry, kubelet, clock
):
    """1, 2, 4, 8 s (here all 10 % short), and never longer than the 10 s interval."""
    kubelet.error = PodResourcesError("UNAVAILABLE", "connection refused")
    async with running(telemetry, kubelet, clock, interval=10):
        await clock.advance(34)
    assert kubelet.asked == pytest.approx([0.0, 0.9, 2.7, 6.3, 13.5, 23.5, 33.5])
    assert series(telemetry, ERRORS, code="UNAVAILABLE") == 7


async def test_each_refresh_is_counted_with_what_triggered_it(telemetry, kubelet, clock):
    async with running(telemetry, kubelet, clock, interval=10) as refresher:
        await clock.advance(0)
        assert series(telemetry, REFRESHES, trigger="interval") == 1
        refresher.request()  # an unknown device was seen
        await clock.advance(1)
        await clock.advance(20)
    assert kubelet.asked == [0.0, 1.0, 11.0, 21.0]
    assert series(telemetry, REFRESHES, trigger="unknown_device") == 1
    assert series(telemetry, REFRESHES, trigger="interval") == 3


async def test_a_kubelet_that_came_back_is_asked_early_again_when_an_unknown_device_is_seen(
    telemetry, kubelet, clock
):
    """Early refreshes stop while the kubelet fails (the back-off paces those) and resume once
    it answers."""
    kubelet.error = PodResourcesError("UNAVAILABLE", "connection refused")
    async with running(telemetry, kubelet, clock, interval=10) as refresher:
        await clock.advance(0)
        kubelet.error = None
        await clock.advance(1)  # the retry, 0.9 s later, is answered
        refresher.request()
        await clock.advance(2)
    assert series(telemetry, REFRESHES, trigger="unknown_device") == 1
    assert kubelet.asked[:2] == pytest.approx([0.0, 0.9]) and len(kubelet.asked) == 3


async def test_a_kubelet_that_never_answers_is_given_up_after_twice_the_timeout_and_a_second(
    telemetry, kubelet, clock, monkeypatch
):
    kubelet.silent = True
    with loop_time_follows(clock, monkeypatch):
        async with running(telemetry, kubelet, clock, interval=10) as refresher:
            await clock.advance(10.9)
            assert not refresher.first_attempt.is_set()
            assert series(telemetry, ERRORS) is None
            await clock.advance(
                0.2
            )  # twice the 5 s timeout and a second after the kubelet was asked
            assert refresher.first_attempt.is_set()
            assert series(telemetry, ERRORS, code="DEADLINE_EXCEEDED") == 1
            assert telemetry.sources_not_ready() == ["pod_resources: no answer in time"]
            assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 0
            assert kubelet.asked == [0.0]
            await clock.advance(1)  # given up at 11.1 s (the clock's step), asked again 0.9 s later
            assert kubelet.asked == pytest.approx([0.0, 12.0])
