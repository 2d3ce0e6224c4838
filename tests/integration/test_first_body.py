"""The agent's first bodies after a start: a held GPU never shows up without its holder.

The real CLI runs nvml (simulated) → k8s_attributes → prometheus against the kubelet stand-in,
and the test scrapes from the moment the endpoint answers. The first body that has any series
of the held GPU must already carry its allocation series and its holder's labels: a body that
showed the GPU unallocated for the first collection would bill nobody for that moment and make
a dashboard flap at every agent start or rollout.
"""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from tests.integration.agent_process import AgentProcess
from tests.peers.kubelet import FakeKubelet, container, pod
from tests.peers.ports import free_port

pytestmark = pytest.mark.integration

HELD = "GPU-f1r57000-0000-4000-8000-000000000000"
IDLE = "GPU-f1r57000-0000-4000-8000-000000000001"


@pytest.fixture
async def kubelet() -> AsyncIterator[FakeKubelet]:
    server = FakeKubelet()
    server.set_pods(pod("ml", "train-0", container("trainer", {"nvidia.com/gpu": [HELD]})))
    server.set_allocatable({"nvidia.com/gpu": [HELD, IDLE]})
    await server.start()
    yield server
    await server.close()


def _pipeline(kubelet: FakeKubelet, port: int, delay: str) -> dict[str, object]:
    return {
        "receivers": {
            "nvml": {
                "backend": "simulated",
                "collection_interval": "200ms",
                "simulated": {"gpus": [{"uuid": HELD}, {"uuid": IDLE}]},
            }
        },
        "processors": {
            "k8s_attributes": {
                "pod_resources_socket": str(kubelet.socket),
                "refresh_interval": "10s",
                "timeout": delay,
                "node_name": "node-a",
            }
        },
        "exporters": {"prometheus": {"endpoint": f"127.0.0.1:{port}"}},
        "service": {
            "pipelines": {
                "metrics": {
                    "receivers": ["nvml"],
                    "processors": ["k8s_attributes"],
                    "exporters": ["prometheus"],
                }
            }
        },
    }


def _first_body_with(port: int, needle: str, agent: AgentProcess, timeout: float = 30.0) -> str:
    """Scrapes from the first moment the endpoint answers and returns the first body holding
    `needle`."""
    deadline = time.monotonic() + timeout
    while True:
        assert agent.proc.poll() is None, agent.output
        assert time.monotonic() < deadline, f"no {needle!r} within {timeout} s:\n{agent.output}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                body: str = reply.read().decode()
        except (urllib.error.URLError, ConnectionError):
            continue  # not listening yet
        if needle in body:
            return body


@pytest.mark.parametrize("kubelet_delay", [0.0, 0.6], ids=["prompt-kubelet", "slow-kubelet"])
async def test_the_first_body_with_a_held_gpu_names_its_holder(
    tmp_path: Path, kubelet: FakeKubelet, agents: list[AgentProcess], kubelet_delay: float
) -> None:
    kubelet.delay = kubelet_delay  # answers within the processor's timeout, but not at once
    port = free_port()
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(_pipeline(kubelet, port, "2s")))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    body = await asyncio.to_thread(_first_body_with, port, f'hw_id="{HELD}"', agent)
    held = [line for line in body.splitlines() if f'hw_id="{HELD}"' in line]
    allocation = [line for line in held if line.startswith("nvidia_gpu_allocation_ratio{")]
    assert len(allocation) == 1, "\n".join(held)
    labels, value = allocation[0].rsplit(" ", 1)
    assert 'k8s_pod_name="train-0"' in labels and float(value) == 1.0
    device_series = [
        line for line in held if not line.startswith(("nvidia_gpu_allocation", "hw_gpu_info"))
    ]
    assert device_series, body
    unlabelled = [line for line in device_series if 'k8s_pod_name="train-0"' not in line]
    assert unlabelled == [], "\n".join(unlabelled)
