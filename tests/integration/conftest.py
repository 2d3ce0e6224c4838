"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.agent_process import AgentProcess
from tests.peers.runtime import Containerd


@pytest.fixture
def agents() -> Iterator[list[AgentProcess]]:
    """Agents a test started (append them): killed when it ends, however it ends."""
    started: list[AgentProcess] = []
    yield started
    for agent in started:
        agent.kill()


@pytest.fixture(scope="module")
def containerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Containerd]:
    """A real containerd, one per test module (its tests plant and stop their own pods)."""
    daemon = Containerd(tmp_path_factory.mktemp("containerd"))
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()
