"""Owned background tasks: what a component starts, its shutdown cancels and awaits."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

_log = logging.getLogger("otelgpu.tasks")


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancels every task given (None is skipped) and waits until each has finished.

    Never raises for the tasks: one that had died of an error is logged. The caller's own
    cancellation (a stop deadline) does propagate: `asyncio.wait` is interrupted by it, where
    awaiting a cancelled task directly would turn it into the task's expected CancelledError
    and swallow it, so a deadline could be silently defeated.
    """
    running = [task for task in tasks if task is not None]
    if not running:
        return
    for task in running:
        task.cancel()
    await asyncio.wait(running)
    for task in running:
        if not task.cancelled() and (exc := task.exception()) is not None:
            _log.error("background task %s had failed", task.get_name(), exc_info=exc)
