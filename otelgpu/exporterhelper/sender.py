"""The retry sender: one request sent until it is accepted or given up, as every push exporter
sends it.

An exporter hands `send` one attempt, a coroutine function that sends the request once. The
attempt's outcome decides what happens next:

- it returns (the request was accepted, maybe in part): `send` returns what it returned;
- it raises `ExportError(retryable=True)`: the request is sent again after the backoff's next
  wait (`retry.py`), or the longer wait the server asked for (`retry_after`: gRPC RetryInfo,
  HTTP Retry-After), unless retrying is off or that wait would end past `max_elapsed_time`;
- it raises `ExportError(retryable=False)`: the request is given up at once.

A request given up makes `send` return `GIVEN_UP`; the exporter counts its points. Any other
exception is a bug in the attempt and goes to the caller.

Shutdown (`drain`): a wait under way ends at once and the request gets one last attempt; a
request that still fails retryably from then on is given up without waiting, and so is every
request after it (`abandoned`): waiting would only delay the exit, so the exporter counts them
unsent. Requests the endpoint accepts during the drain are still sent.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Final, Literal, TypeVar

from otelgpu.component.errors import ExportError
from otelgpu.exporterhelper.config import RetryConfig
from otelgpu.exporterhelper.retry import Backoff

T = TypeVar("T")


class _GivenUp(Enum):
    GIVEN_UP = "given up"


GIVEN_UP: Final = _GivenUp.GIVEN_UP  # what `send` returns for a request it gave up
GivenUp = Literal[_GivenUp.GIVEN_UP]


class RetrySender:
    """Sends requests with retries for one exporter (all its consumers share it).

    `failed(error, delay)` is told of every failed attempt: `delay` is the seconds until the
    next one, or None when the request is given up (the exporter logs from it). `sleep`,
    `monotonic` and `rand` (the jitter's numbers in [0, 1)) are the clock it waits on."""

    def __init__(
        self,
        config: RetryConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._config = config
        self._sleep = sleep
        self._monotonic = monotonic
        self._rand = rand
        self._draining = asyncio.Event()
        self.abandoned = False  # draining, and the endpoint still failed: nothing waits now

    @property
    def draining(self) -> bool:
        """Whether shutdown has begun (`drain`)."""
        return self._draining.is_set()

    def drain(self) -> None:
        """Shutdown begins: waits end now; a retryable failure from now on gives up its
        request and every later one (`abandoned`)."""
        self._draining.set()

    async def send(
        self,
        attempt: Callable[[], Awaitable[T]],
        failed: Callable[[ExportError, float | None], None],
        *,
        waiting: Callable[[], None] | None = None,
    ) -> T | GivenUp:
        """`attempt`'s result once it returns, or `GIVEN_UP`; `GIVEN_UP` at once when
        `abandoned`. `waiting` runs before each wait between attempts (the exporter makes its
        request small while it waits)."""
        if self.abandoned:
            return GIVEN_UP
        backoff = Backoff(self._config, self._monotonic(), rand=self._rand)
        while True:
            try:
                return await attempt()
            except ExportError as err:
                delay = backoff.next_delay(err, self._monotonic())
                if delay is not None and self.draining:
                    self.abandoned, delay = True, None
                failed(err, delay)
            # Out of the `except`: the error and its traceback (the attempt's frames, which
            # hold the request) are let go before the wait.
            if delay is None:
                return GIVEN_UP
            if waiting is not None:
                waiting()
            await self._wait(delay)  # a drain cuts it short: one last attempt at once

    async def _wait(self, delay: float) -> None:
        """Sleeps `delay` seconds, or less if the drain begins meanwhile."""
        sleeper = asyncio.ensure_future(self._sleep(delay))
        draining = asyncio.ensure_future(self._draining.wait())
        try:
            await asyncio.wait((sleeper, draining), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            draining.cancel()
            await asyncio.gather(sleeper, draining, return_exceptions=True)
