"""`cancel_and_wait`: owned tasks are cancelled and awaited, and the caller's own cancellation
(a stop deadline) is never swallowed on the way."""

from __future__ import annotations

import asyncio
import logging

import pytest

from otelgpu.component.tasks import cancel_and_wait


def _stubborn(release: asyncio.Event) -> asyncio.Task[None]:
    """A task that takes its time to wind down once cancelled (until `release`, or a second
    cancellation, so that the old code fails these tests instead of hanging them)."""

    async def run() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()
            raise

    return asyncio.create_task(run())


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_tasks_are_cancelled_and_awaited() -> None:
    tasks = [asyncio.create_task(asyncio.Event().wait()) for _ in range(3)]
    await asyncio.sleep(0)
    await cancel_and_wait(*tasks, None)
    assert all(t.cancelled() for t in tasks)


async def test_the_callers_own_cancellation_is_not_swallowed() -> None:
    release = asyncio.Event()
    inner = _stubborn(release)
    await asyncio.sleep(0)
    went_on = []

    async def caller() -> None:
        await cancel_and_wait(inner)
        went_on.append(True)

    outer = asyncio.create_task(caller())
    await _settle()  # inner is now winding down, waiting for `release`
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert went_on == []
    release.set()
    await asyncio.wait([inner])
    assert inner.cancelled()


async def test_a_stop_deadline_still_fires_while_waiting() -> None:
    release = asyncio.Event()
    inner = _stubborn(release)
    deadline: list[asyncio.Timeout] = []

    async def stop() -> None:
        async with asyncio.timeout(None) as timeout:
            deadline.append(timeout)
            await cancel_and_wait(inner)

    stopping = asyncio.create_task(stop())
    await _settle()
    deadline[0].reschedule(asyncio.get_running_loop().time())
    with pytest.raises(TimeoutError):
        await stopping
    release.set()
    await asyncio.wait([inner])


async def test_a_task_that_died_of_an_error_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken() -> None:
        raise RuntimeError("bug in a background task")

    task = asyncio.create_task(broken(), name="refresh:k8s_attributes")
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="otelgpu"):
        await cancel_and_wait(task)
    assert any("refresh:k8s_attributes" in r.getMessage() for r in caplog.records)
