"""Process-wide settings belong to the agent: set once when it runs, put back when it stops.

(That no HTTP server changes them is checked in test_http_attacks.py.)
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator

import pytest

from otelgpu.confighttp import listener as http_listener
from otelgpu.service.agent import Agent
from tests.unit.config.test_reload import config, core_registry


@pytest.fixture(autouse=True)
def _interval_restored() -> Iterator[None]:
    saved = sys.getswitchinterval()
    yield
    sys.setswitchinterval(saved)


async def _while_running(agent: Agent) -> float:
    """The switch interval seen while `agent` runs (started, not yet stopped)."""
    running = asyncio.create_task(agent.run(config("v1")))
    give_up = time.monotonic() + 30
    while agent.service is None:
        assert not running.done() and time.monotonic() < give_up, "the agent did not start"
        await asyncio.sleep(0.01)
    seen = sys.getswitchinterval()
    agent.request_stop()
    await running
    return seen


async def test_the_agent_shortens_the_switch_interval_while_it_runs() -> None:
    sys.setswitchinterval(0.005)  # the interpreter's default
    seen = await _while_running(Agent(lambda: config("v1"), core_registry()))
    assert seen == pytest.approx(http_listener.SWITCH_INTERVAL, abs=1e-6)
    assert http_listener.SWITCH_INTERVAL < 0.001
    assert sys.getswitchinterval() == pytest.approx(0.005)  # put back


async def test_a_shorter_switch_interval_is_left_as_it_is() -> None:
    sys.setswitchinterval(http_listener.SWITCH_INTERVAL / 2)
    shorter = sys.getswitchinterval()  # as the interpreter keeps it (whole microseconds)
    seen = await _while_running(Agent(lambda: config("v1"), core_registry()))
    assert seen == shorter
    assert sys.getswitchinterval() == shorter
