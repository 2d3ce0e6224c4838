"""`RetrySender` on its own: an attempt accepted, retried after the backoff's waits (or the
server's longer one), given up (permanent, disabled, past `max_elapsed_time`), and cut short
by a drain; on a fake clock, with the jitter's random numbers given, so every wait is exact."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from otelgpu.component.errors import ExportError
from otelgpu.exporterhelper.config import RetryConfig
from otelgpu.exporterhelper.sender import GIVEN_UP, RetrySender
from tests.fakes import FakeClock

RETRYABLE = ExportError("gRPC UNAVAILABLE", retryable=True)
PERMANENT = ExportError("HTTP 400", retryable=False)


class Endpoint:
    """Answers each attempt with the next scripted outcome (then "ok"), noting when each came
    (on the fake clock) and what the sender reported of each failure."""

    def __init__(self, clock: FakeClock, *outcomes: Any) -> None:
        self.clock = clock
        self.outcomes = list(outcomes)
        self.times: list[float] = []
        self.failures: list[tuple[str, float | None]] = []

    async def attempt(self) -> str:
        self.times.append(self.clock.now)
        outcome = self.outcomes.pop(0) if self.outcomes else "ok"
        if isinstance(outcome, BaseException):
            raise outcome
        return str(outcome)

    def failed(self, error: ExportError, delay: float | None) -> None:
        self.failures.append((str(error), delay))

    def elapsed(self) -> list[float]:
        return [t - self.times[0] for t in self.times]


def sender(
    clock: FakeClock, rand: Callable[[], float] = lambda: 0.5, **options: Any
) -> RetrySender:
    config = RetryConfig.model_validate(options)
    return RetrySender(config, sleep=clock.sleep, monotonic=clock.monotonic, rand=rand)


async def sent(s: RetrySender, endpoint: Endpoint, clock: FakeClock, **kwargs: Any) -> Any:
    """What `send` returned, the fake clock moved until it did."""
    task = asyncio.create_task(s.send(endpoint.attempt, endpoint.failed, **kwargs))
    while not task.done():
        await clock.advance(1)
    return task.result()


async def test_an_accepted_attempt_is_returned_and_nothing_is_reported(clock: FakeClock) -> None:
    endpoint = Endpoint(clock)
    assert await sent(sender(clock), endpoint, clock) == "ok"
    assert (len(endpoint.times), endpoint.failures) == (1, [])


async def test_retryable_failures_are_sent_again_after_the_backoffs_waits(
    clock: FakeClock,
) -> None:
    endpoint = Endpoint(clock, RETRYABLE, RETRYABLE, "accepted")
    # rand 0.5: no jitter; the waits are initial_interval, then x multiplier
    result = await sent(sender(clock, initial_interval="2s", multiplier=3), endpoint, clock)
    assert result == "accepted"
    assert endpoint.elapsed() == [0, 2, 8]
    assert endpoint.failures == [(str(RETRYABLE), 2.0), (str(RETRYABLE), 6.0)]


async def test_the_servers_longer_delay_is_honoured(clock: FakeClock) -> None:
    throttled = ExportError("RESOURCE_EXHAUSTED", retryable=True, retry_after=40.0)
    endpoint = Endpoint(clock, throttled)
    assert await sent(sender(clock), endpoint, clock) == "ok"
    assert endpoint.elapsed() == [0, 40]
    assert endpoint.failures == [(str(throttled), 40.0)]


@pytest.mark.parametrize(
    ("error", "options"),
    [(PERMANENT, {}), (RETRYABLE, {"enabled": False})],
    ids=["permanent", "retries-disabled"],
)
async def test_a_failure_not_to_retry_gives_up_at_once(
    clock: FakeClock, error: ExportError, options: dict[str, Any]
) -> None:
    endpoint = Endpoint(clock, error)
    assert await sent(sender(clock, **options), endpoint, clock) is GIVEN_UP
    assert (len(endpoint.times), endpoint.failures) == (1, [(str(error), None)])


async def test_a_wait_past_max_elapsed_time_gives_up(clock: FakeClock) -> None:
    endpoint = Endpoint(clock, *[RETRYABLE] * 10)
    s = sender(clock, initial_interval="4s", multiplier=2, max_elapsed_time="20s")
    assert await sent(s, endpoint, clock) is GIVEN_UP
    assert endpoint.elapsed() == [0, 4, 12]  # the next wait (16s) would end at 28s
    assert [delay for _, delay in endpoint.failures] == [4.0, 8.0, None]


async def test_waiting_runs_before_each_wait_only(clock: FakeClock) -> None:
    endpoint = Endpoint(clock, RETRYABLE, RETRYABLE)
    seen: list[int] = []
    await sent(sender(clock), endpoint, clock, waiting=lambda: seen.append(len(endpoint.times)))
    assert seen == [1, 2]  # after the first and second attempts, never after the last


async def test_a_drain_ends_the_wait_and_allows_one_last_attempt(clock: FakeClock) -> None:
    endpoint = Endpoint(clock, RETRYABLE, "accepted")
    s = sender(clock, initial_interval="20s")
    task = asyncio.create_task(s.send(endpoint.attempt, endpoint.failed))
    await clock.advance(0)
    assert len(endpoint.times) == 1  # waiting its 20s
    s.drain()
    await clock.advance(0)
    assert task.done() and task.result() == "accepted"
    assert endpoint.elapsed() == [0, 0]  # not a second of the wait was spent
    assert s.draining and not s.abandoned


async def test_a_retryable_failure_while_draining_abandons_every_later_request(
    clock: FakeClock,
) -> None:
    endpoint = Endpoint(clock, RETRYABLE, RETRYABLE)
    s = sender(clock, initial_interval="20s")
    task = asyncio.create_task(s.send(endpoint.attempt, endpoint.failed))
    await clock.advance(0)
    s.drain()
    await clock.advance(0)
    assert task.result() is GIVEN_UP
    assert endpoint.failures == [(str(RETRYABLE), 20.0), (str(RETRYABLE), None)]
    assert s.abandoned
    later = Endpoint(clock)
    assert await sent(s, later, clock) is GIVEN_UP
    assert later.times == []  # not even tried: the exit is not delayed by it


async def test_a_permanent_failure_while_draining_abandons_nothing(clock: FakeClock) -> None:
    s = sender(clock)
    s.drain()
    assert await sent(s, Endpoint(clock, PERMANENT), clock) is GIVEN_UP
    assert not s.abandoned
    assert await sent(s, Endpoint(clock), clock) == "ok"


async def test_an_unexpected_exception_goes_to_the_caller(clock: FakeClock) -> None:
    endpoint = Endpoint(clock, ValueError("a bug in the attempt"))
    with pytest.raises(ValueError, match="a bug in the attempt"):
        await sent(sender(clock), endpoint, clock)
    assert endpoint.failures == []


class Request:
    """A request's bytes, as an object a weak reference can watch."""


async def test_nothing_the_failed_attempt_held_is_kept_while_waiting(clock: FakeClock) -> None:
    # The error's traceback holds the attempt's frames, and with them the request: kept
    # through a wait, an outage would hold every in-flight request in memory.
    held: list[weakref.ref[Request]] = []
    waited = asyncio.Event()

    async def attempt() -> str:
        request = Request()
        held.append(weakref.ref(request))
        if len(held) == 1:
            raise ExportError("gRPC UNAVAILABLE", retryable=True)
        return "ok"

    def failed(error: ExportError, delay: float | None) -> None:
        pass

    s = sender(clock)
    task = asyncio.create_task(s.send(attempt, failed, waiting=waited.set))
    await waited.wait()
    await clock.advance(0)
    gc.collect()
    assert held[0]() is None
    while not task.done():
        await clock.advance(1)
    assert task.result() == "ok"


@pytest.mark.parametrize("ended_by", ["its time", "the drain"])
async def test_a_wait_leaves_nothing_running_once_it_ends(clock: FakeClock, ended_by: str) -> None:
    # A wait runs the sleep and the drain's event side by side: whichever ends it, the other
    # is cancelled and finished before the next attempt, not left for the loop to reap (an
    # outage retries for hours).
    s = sender(clock)
    left: list[set[asyncio.Task[Any]]] = []

    async def attempt() -> str:
        left.append(asyncio.all_tasks() - {asyncio.current_task()})  # type: ignore[operator]
        if len(left) == 1:
            raise ExportError("gRPC UNAVAILABLE", retryable=True)
        return "ok"

    task = asyncio.create_task(s.send(attempt, lambda error, delay: None))
    await clock.advance(0)
    if ended_by == "the drain":
        s.drain()
    while not task.done():
        await clock.advance(1)
    assert task.result() == "ok"
    assert left[1] == left[0]  # no task the wait started is still there
