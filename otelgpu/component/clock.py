"""Time as a component sees it: the agent's clock, or one a test advances by hand.

`AGENT_CLOCK` is the one clock the service hands every component (`Settings.clock`). Times one
component leaves on a resource for another (the `holder.*` notes k8s_attributes leaves and
container_env compares with when it listed the runtime, `otelgpu.pdata.notes`) mean something
only on one clock: both read theirs off their Settings, never a clock of their own.
"""

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


# The agent's clock (`Settings.clock`): stateless, so one instance serves every service.
AGENT_CLOCK: Clock = RealClock()
