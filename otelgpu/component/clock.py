"""Time as a component sees it: the event loop's clock, or one a test advances by hand."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Time as the controller sees it; tests pass a clock they advance by hand."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""

    async def sleep(self, seconds: float) -> None:
        """Waits `seconds` (cancellable)."""


class RealClock:
    """The event loop's clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
