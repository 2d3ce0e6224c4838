"""Slurm job and step of a GPU process, read from a real cgroup hierarchy.

slurmd is not installed here; what the receiver reads is the kernel's answer in
/proc/<pid>/cgroup, so the test makes the cgroups slurmd makes (cgroup v1:
`<controller>/slurm/uid_<uid>/job_<id>/step_<n>/task_<t>`), moves a real process into one and
lets the receiver read the real /proc. It needs root and a writable cgroup v1 controller or a
cgroup v2 mount: without them it fails (never skips), like every peer test.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink

pytestmark = pytest.mark.integration
MEMORY = "nvidia.gpu.process.memory.usage"  # opt-in

CGROUP = Path("/sys/fs/cgroup")


def _hierarchy() -> tuple[Path, str]:
    """A writable cgroup root and the layout slurmd uses on it (v1: .../slurm/uid_N; v2:
    .../system.slice/slurmstepd.scope)."""
    for controller in ("freezer", "pids", "memory"):
        root = CGROUP / controller
        if (root / "cgroup.procs").exists() and os.access(root, os.W_OK):
            return root, f"slurm/uid_{os.getuid()}"
    if (CGROUP / "cgroup.controllers").exists() and os.access(CGROUP, os.W_OK):
        return CGROUP, "system.slice/slurmstepd.scope"
    raise RuntimeError(f"no writable cgroup hierarchy under {CGROUP} (run as root)")


@pytest.fixture
def slurm_task() -> Iterator[tuple[int, str, str]]:
    """A real process in a cgroup named like a Slurm task: (pid, job id, step id)."""
    root, layout = _hierarchy()
    job, step = str(40000 + uuid.uuid4().int % 10000), "3"
    base = root / f"otelgpu-test-{uuid.uuid4().hex[:8]}"  # our own subtree, removed after
    task = base / layout / f"job_{job}" / f"step_{step}" / "task_0"
    task.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        (task / "cgroup.procs").write_text(str(sleeper.pid))
        yield sleeper.pid, job, step
    finally:
        sleeper.kill()
        sleeper.wait()
        for path in sorted((p for p in base.rglob("*") if p.is_dir()), reverse=True):
            path.rmdir()
        base.rmdir()


async def test_a_gpu_process_in_a_slurm_cgroup_carries_its_job_and_step(
    slurm_task: tuple[int, str, str], telemetry: SelfTelemetry
) -> None:
    pid, job, step = slurm_task
    assert f"job_{job}/step_{step}" in Path(f"/proc/{pid}/cgroup").read_text()
    config = NvmlReceiverConfig.model_validate(
        {
            "processes": True,
            "metrics": {MEMORY: {"enabled": True}},
            "backend": "simulated",
            "simulated": {"gpus": [{"processes": [{"pid": pid, "used_memory": "2GiB"}]}]},
        }
    )
    settings = make_settings("nvml", Kind.RECEIVER, telemetry)
    receiver = NvmlReceiver(settings, config, Sink(), clock=FakeClock())
    try:
        batch = await receiver.scrape()
    finally:
        await receiver.shutdown()
    (process,) = [rm for rm in batch if rm.resource.get(semconv.PROCESS_PID) == pid]
    assert process.resource[semconv.SLURM_JOB_ID] == job
    assert process.resource[semconv.SLURM_STEP_ID] == step
    assert process.resource[semconv.CONTAINER_ID] == ""  # a batch job, not a container
