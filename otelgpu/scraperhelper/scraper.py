"""The scrape controller that runs a polling receiver: interval, per-scrape timeout, a clock.

A receiver supplies only `async def scrape() -> Batch`; the controller calls it on time,
bounds it with a timeout, counts its points and duration in self-telemetry, forwards the
batch, and never lets a failed scrape stop the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from otelgpu.component.clock import Clock, RealClock
from otelgpu.component.component import MetricsConsumer, Settings
from otelgpu.component.consumer import GuardedConsumer
from otelgpu.component.log_limits import capped
from otelgpu.component.tasks import cancel_and_wait
from otelgpu.pdata.model import Batch, point_count


class ScrapeController:
    """Calls `scrape` every `interval` seconds and hands each batch to `next`."""

    def __init__(
        self,
        *,
        settings: Settings,
        scrape: Callable[[], Awaitable[Batch]],
        next: MetricsConsumer,
        interval: float,
        timeout: float | None = None,
        initial_delay: float = 0.0,
        clock: Clock | None = None,
    ) -> None:
        self._settings = settings
        self._scrape = scrape
        # The scrape loop must outlive any consumer bug, whoever built the chain after it.
        self._next = GuardedConsumer(f"downstream of {settings.id}", next, settings.telemetry)
        self._interval = interval
        self._timeout = timeout if timeout is not None else interval
        self._initial_delay = initial_delay
        self._clock = clock or RealClock()
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self.scrapes = 0

    async def start(self) -> None:
        """Starts the loop in a task this controller owns."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"scrape:{self._settings.id}")
            self._task.add_done_callback(self._ended)

    async def shutdown(self) -> None:
        """Cancels and awaits the loop; idempotent."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def _ended(self, task: asyncio.Task[None]) -> None:
        # The loop ends only by cancellation; anything else is a bug that stops collection.
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._settings.logger.error(
                "the scrape loop stopped; no more collections until a restart or reload",
                exc_info=exc,
            )

    async def _run(self) -> None:
        due = self._clock.monotonic() + self._initial_delay
        while True:
            delay = due - self._clock.monotonic()
            if delay > 0:
                await self._clock.sleep(delay)
            await self.scrape_once()
            due += self._interval
            now = self._clock.monotonic()
            if due <= now:  # fell behind: skip the missed ticks, keep the phase
                due += ((now - due) // self._interval + 1) * self._interval

    async def scrape_once(self) -> None:
        """One collection: bounded, measured, counted, forwarded. Never raises."""
        rid = str(self._settings.id)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout):
                batch = await self._scrape()
        except Exception as exc:  # a failed scrape is counted, never fatal
            self._report_failure(exc)
            return
        finally:
            self._settings.telemetry.collection_duration(rid, time.perf_counter() - started)
            self.scrapes += 1
        if self._failing:
            self._failing = False
            self._settings.logger.info("scrapes succeed again")
        self._settings.telemetry.receiver_points(rid, point_count(batch))
        if batch:
            await self._next.consume(batch)

    def _report_failure(self, exc: Exception) -> None:
        reason = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        reason = capped(reason)
        self._settings.telemetry.count(
            "otelgpu_receiver_scrape_errors_total",
            1,
            receiver=str(self._settings.id),
        )
        if not self._failing:  # log the change of state, not every failed cycle
            self._failing = True
            self._settings.logger.warning("scrape failed: %s", reason)
