"""pid → container mapping against real containers started by a real dockerd (PEERS.md).

A missing dockerd/containerd/busybox fails these tests (tests/peers/runtime.py raises); they
never skip. The GPU side is the simulated backend, told that the containers' host pids are
using a GPU, so the receiver maps them exactly as it maps NVML's process list on a real node.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml.cgroup import container_id_from_cgroup
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink
from tests.peers.runtime import Dockerd, docker_daemon

pytestmark = pytest.mark.integration
MEMORY = "nvidia.gpu.process.memory.usage"  # opt-in


@pytest.fixture(scope="module")
def dockerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dockerd]:
    with docker_daemon(tmp_path_factory.mktemp("nvml-docker")) as daemon:
        yield daemon


def test_cgroup_of_a_container_names_it(dockerd: Dockerd) -> None:
    container = dockerd.run_container("nvml-cgroup-parse")
    text = Path(f"/proc/{container.pid}/cgroup").read_text()
    assert container_id_from_cgroup(text) == container.id, text
    assert container_id_from_cgroup(Path("/proc/self/cgroup").read_text()) != container.id


async def test_gpu_processes_carry_their_container_id(
    dockerd: Dockerd, telemetry: SelfTelemetry
) -> None:
    trainer = dockerd.run_container("nvml-trainer")
    server = dockerd.run_container("nvml-server")
    host_pid = os.getpid()
    processes = [
        {"pid": trainer.pid, "used_memory": "8GiB"},
        {"pid": server.pid, "used_memory": "1GiB"},
        {"pid": host_pid, "used_memory": "512MiB"},
    ]
    config = NvmlReceiverConfig.model_validate(
        {
            "processes": True,
            "metrics": {MEMORY: {"enabled": True}},
            "backend": "simulated",
            "simulated": {"gpus": [{"processes": processes}]},
        }
    )
    settings = make_settings("nvml", Kind.RECEIVER, telemetry)
    receiver = NvmlReceiver(settings, config, Sink(), clock=FakeClock())
    try:
        batch = await receiver.scrape()
    finally:
        await receiver.shutdown()

    by_pid = {
        rm.resource["process.pid"]: rm.resource for rm in batch if "process.pid" in rm.resource
    }
    assert by_pid[trainer.pid]["container.id"] == trainer.id
    assert by_pid[server.pid]["container.id"] == server.id
    assert by_pid[host_pid]["container.id"] != trainer.id
    assert by_pid[trainer.pid]["hw.id"] == batch[0].resource["hw.id"]


async def test_a_removed_container_is_forgotten(dockerd: Dockerd, telemetry: SelfTelemetry) -> None:
    job = dockerd.run_container("nvml-short-job")
    config = NvmlReceiverConfig.model_validate(
        {
            "processes": True,
            "metrics": {MEMORY: {"enabled": True}},
            "backend": "simulated",
            "simulated": {"gpus": [{"processes": [{"pid": job.pid}]}]},
        }
    )
    settings = make_settings("nvml", Kind.RECEIVER, telemetry)
    receiver = NvmlReceiver(settings, config, Sink(), clock=FakeClock())
    try:
        first = await receiver.scrape()
        dockerd.remove_container(job.id)
        receiver.client.set_processes(0, [])  # type: ignore[attr-defined]
        second = await receiver.scrape()
    finally:
        await receiver.shutdown()
    assert [rm.resource["container.id"] for rm in first if "process.pid" in rm.resource] == [job.id]
    assert not [rm for rm in second if "process.pid" in rm.resource and rm.metrics]
    # The ended process is said gone once (a resource with no metrics), so its series leave.
    assert [rm.identity for rm in second if not rm.metrics] == [
        rm.identity for rm in first if "process.pid" in rm.resource
    ]
