"""Set-up shared by the deploy tests that run the agent on a pipeline of the bundle."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.peers.kubelet import FakeKubelet, container, pod

SIMULATED_GPU0 = "GPU-5157a7e0-0000-4000-8000-000000000000"  # the simulated backend's first UUID


@pytest.fixture
async def kubelet() -> AsyncIterator[FakeKubelet]:
    """The pod-resources stand-in: pod ml/train-0 (container trainer) holds the simulated GPU
    (allocation series, holder labels)."""
    server = FakeKubelet()
    server.set_pods(
        pod("ml", "train-0", container("trainer", {"nvidia.com/gpu": [SIMULATED_GPU0]}))
    )
    await server.start()
    yield server
    await server.close()
