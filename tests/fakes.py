"""Small explicit test doubles: a clock advanced by hand, a host, a sink that keeps batches."""

from __future__ import annotations

import asyncio
import heapq
import itertools

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch


class FakeClock:
    """A clock that moves only when a test calls `advance`; sleepers wake in time order."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Moves time forward, waking every sleeper due on the way and letting it run."""
        target = self.now + seconds
        await _settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            due, _, future = heapq.heappop(self._sleepers)
            self.now = max(self.now, due)
            if not future.done():
                future.set_result(None)
            await _settle()
        self.now = max(self.now, target)
        await _settle()


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class FakeHost:
    """The Host a component sees, without a service around it."""

    def __init__(self, telemetry: SelfTelemetry | None = None) -> None:
        self.telemetry = telemetry or SelfTelemetry()
        self.ready = True

    def readiness(self) -> tuple[bool, list[str]]:
        return self.ready, [] if self.ready else ["not started"]


class Sink:
    """A MetricsConsumer that keeps every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []

    async def consume(self, batch: Batch) -> None:
        self.batches.append(batch)

    @property
    def resources(self) -> list[dict[str, object]]:
        return [dict(rm.resource) for batch in self.batches for rm in batch]

    def metric_names(self) -> set[str]:
        return {m.name for batch in self.batches for rm in batch for m in rm.metrics}


def telemetry_points(
    telemetry: SelfTelemetry, name: str
) -> dict[tuple[tuple[str, object], ...], float]:
    """The points of the self-telemetry instrument `name`, by their sorted attributes."""
    return {
        tuple(sorted(p.attributes.items())): p.value
        for m in telemetry.collect().metrics
        if m.name == name
        for p in m.points
    }
