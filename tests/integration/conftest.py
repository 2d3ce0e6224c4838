"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.agent_process import AgentProcess


@pytest.fixture
def agents() -> Iterator[list[AgentProcess]]:
    """Agents a test started (append them): killed when it ends, however it ends."""
    started: list[AgentProcess] = []
    yield started
    for agent in started:
        agent.kill()
