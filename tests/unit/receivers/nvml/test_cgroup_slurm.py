"""Slurm job/step of a GPU process from its cgroup path (cgroup/v1 and cgroup/v2 plugins)."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.pdata import semconv
from otelgpu.receivers.nvml.cgroup import ContainerResolver, slurm_from_cgroup
from tests.unit.receivers.nvml.conftest import PROCESS_METRICS_ON, MakeReceiver

JOB, STEP, SLUID = semconv.SLURM_JOB_ID, semconv.SLURM_STEP_ID, semconv.SLURM_JOB_SLUID

# Every controller line of a cgroup v1 task, as slurmstepd's cgroup/v1 plugin leaves them.
V1 = (
    "".join(
        f"{n}:{c}:/slurm/uid_1000/job_4711/step_0/task_0\n"
        for n, c in ((12, "devices"), (7, "memory"), (4, "cpuset"), (3, "freezer"))
    )
    + "1:name=systemd:/system.slice/slurmd.service\n"
)

CASES = [
    ("cgroup/v1, numeric step", V1, {JOB: "4711", STEP: "0"}),
    (
        "cgroup/v1, batch step, %n prepend",
        "7:memory:/slurm_node1/uid_0/job_12/step_batch/task_0\n",
        {JOB: "12", STEP: "batch"},
    ),
    (
        "cgroup/v2 up to 25.11",
        "0::/system.slice/slurmstepd.scope/job_987654/step_3/user/task_1\n",
        {JOB: "987654", STEP: "3"},
    ),
    (
        "cgroup/v2, ssh-adopted process (pam_slurm_adopt)",
        "0::/system.slice/slurmstepd.scope/job_55/step_extern/user/task_special\n",
        {JOB: "55", STEP: "extern"},
    ),
    (
        "cgroup/v2, heterogeneous step component",
        "0::/system.slice/slurmstepd.scope/job_55/step_0+1/user/task_0\n",
        {JOB: "55", STEP: "0+1"},
    ),
    (
        "cgroup/v2, job level only (slurmstepd itself)",
        "0::/system.slice/slurmstepd.scope/job_55\n",
        {JOB: "55"},
    ),
    (
        "cgroup/v2, Slurm 26.05 SLUID path",
        "0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0\n",
        {SLUID: "sEKNKTV3WPV500", STEP: "0"},
    ),
    ("a pod's process", "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-1.scope\n", {}),
    ("job_ as a prefix of another name", "0::/system.slice/job_runner.service\n", {}),
    ("an s-name with no step below it", "0::/user.slice/sEKNKTV3WPV500\n", {}),
    ("host process", "0::/user.slice/user-1000.slice/session-3.scope\n", {}),
    ("empty file", "", {}),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_slurm_from_cgroup(text: str, expected: dict[str, str]) -> None:
    assert slurm_from_cgroup(text) == expected


def test_resolver_gives_container_and_slurm_attributes_from_real_files(tmp_path: Path) -> None:
    for pid, text in ((10, V1), (20, "0::/user.slice/user-0.slice/session-1.scope\n")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(text)
    resolver = ContainerResolver(str(tmp_path))
    assert resolver.attributes(10) == {semconv.CONTAINER_ID: "", JOB: "4711", STEP: "0"}
    assert resolver.attributes(20) == {semconv.CONTAINER_ID: ""}
    assert resolver.attributes(30) == {semconv.CONTAINER_ID: ""}  # exited: nothing, no error


async def test_gpu_processes_of_slurm_tasks_carry_job_and_step(
    make_receiver: MakeReceiver, tmp_path: Path
) -> None:
    (tmp_path / "100").mkdir()
    (tmp_path / "100" / "cgroup").write_text(
        "0::/system.slice/slurmstepd.scope/job_31337/step_2/user/task_0\n"
    )
    receiver = make_receiver(
        processes=True,
        metrics=PROCESS_METRICS_ON,
        host_proc=str(tmp_path),
        simulated={"gpus": [{"processes": [{"pid": 100, "used_memory": "1GiB"}]}]},
    )
    batch = await receiver.scrape()
    (process,) = [rm for rm in batch if semconv.PROCESS_PID in rm.resource]
    assert process.resource[JOB] == "31337"
    assert process.resource[STEP] == "2"
    assert process.resource[semconv.CONTAINER_ID] == ""
