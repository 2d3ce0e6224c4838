"""The CPU limit the agent names at start (`otelgpu.service.cpu_limit`), read from cgroup trees laid
out as the kernel lays them out, v2 and v1, inside a container and on a host."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from otelgpu.service.cpu_limit import cpu_limit, cpu_limit_note


def _files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _self(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "self-cgroup"
    path.write_text(text)
    return path


def test_v2_inside_a_container_reads_cpu_max_at_the_mount(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _files(root, {"cgroup.controllers": "cpu memory", "cpu.max": "20000 100000\n"})
    assert cpu_limit(root, _self(tmp_path, "0::/\n")) == pytest.approx(0.2)


def test_v2_without_a_quota_is_none(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _files(root, {"cgroup.controllers": "cpu", "cpu.max": "max 100000\n"})
    assert cpu_limit(root, _self(tmp_path, "0::/\n")) is None


def test_v2_on_a_host_takes_the_smallest_quota_along_the_path(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _files(
        root,
        {
            "cgroup.controllers": "cpu",
            "kubepods.slice/cpu.max": "400000 100000\n",  # 4 cores for all pods
            "kubepods.slice/pod1/cpu.max": "50000 100000\n",  # 0.5 for this one
            "kubepods.slice/pod1/agent/cpu.max": "max 100000\n",
            "other/cpu.max": "10000 100000\n",  # not this process's
        },
    )
    self_cgroup = _self(tmp_path, "0::/kubepods.slice/pod1/agent\n")
    assert cpu_limit(root, self_cgroup) == pytest.approx(0.5)


@pytest.mark.parametrize("mount", ["cpu", "cpu,cpuacct", "cpuacct,cpu"])
def test_v1_reads_the_cpu_hierarchy_however_it_is_mounted(tmp_path: Path, mount: str) -> None:
    root = tmp_path / "cg"
    _files(
        root,
        {
            f"{mount}/cpu.cfs_quota_us": "-1\n",
            f"{mount}/cpu.cfs_period_us": "100000\n",
            f"{mount}/kubepods/pod1/cpu.cfs_quota_us": "20000\n",
            f"{mount}/kubepods/pod1/cpu.cfs_period_us": "100000\n",
            # the memory hierarchy's path is not the cpu one's (and is no cpu directory)
            f"{mount}/system.slice/cpu.cfs_quota_us": "5000\n",
            f"{mount}/system.slice/cpu.cfs_period_us": "100000\n",
        },
    )
    self_cgroup = _self(
        tmp_path,
        f"6:cpuset:/\n5:memory:/system.slice\n3:{mount}:/kubepods/pod1\n0::/system.slice\n",
    )
    assert cpu_limit(root, self_cgroup) == pytest.approx(0.2)


def test_v1_reads_the_quota_of_a_cgroup_whose_name_holds_colons(tmp_path: Path) -> None:
    # containerd's systemd-style cgroup names, "<slice>:<prefix>:<id>", on a cgroupfs host
    own = "kubepods-pod1.slice:cri-containerd:abc"
    root = tmp_path / "cg"
    for directory, quota in (("cpu,cpuacct", "-1"), (f"cpu,cpuacct/{own}", "50000")):
        (root / directory).mkdir(parents=True)
        (root / directory / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (root / directory / "cpu.cfs_period_us").write_text("100000\n")
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text(f"5:memory:/other\n3:cpu,cpuacct:/{own}\n")
    assert cpu_limit(root, self_cgroup) == pytest.approx(0.5)


def test_v2_on_a_hybrid_host_reads_the_unified_line(tmp_path: Path) -> None:
    """/proc/self/cgroup lists v1 hierarchies before the unified one where both are mounted."""
    root = tmp_path / "cg"
    _files(
        root,
        {
            "cgroup.controllers": "cpu",
            "agent/cpu.max": "30000 100000\n",
            "other/cpu.max": "10000 100000\n",
        },
    )
    self_cgroup = _self(tmp_path, "1:name=systemd:/other\n0::/agent\n")
    assert cpu_limit(root, self_cgroup) == pytest.approx(0.3)


def test_an_unreadable_own_cgroup_still_reads_the_mount(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _files(root, {"cgroup.controllers": "cpu", "cpu.max": "150000 100000\n"})
    assert cpu_limit(root, tmp_path / "absent-self") == pytest.approx(1.5)


def test_v1_in_a_container_whose_own_cgroup_is_the_mount(tmp_path: Path) -> None:
    """/proc/self/cgroup names the host's path, which the container's mount lacks."""
    root = tmp_path / "cg"
    _files(root, {"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"})
    self_cgroup = _self(tmp_path, "3:cpu:/kubepods/besteffort/pod9/abc\n")
    assert cpu_limit(root, self_cgroup) == pytest.approx(2.0)
    _files(root, {"cpu/cpu.cfs_quota_us": "-1\n"})
    assert cpu_limit(root, self_cgroup) is None


def test_nothing_readable_is_none(tmp_path: Path) -> None:
    assert cpu_limit(tmp_path / "absent", tmp_path / "absent-self") is None
    root = tmp_path / "cg"
    _files(root, {"cgroup.controllers": "cpu", "cpu.max": "garbage\n"})
    assert cpu_limit(root, _self(tmp_path, "0::/\n")) is None


def test_the_note_names_the_limit_and_where_to_read_more() -> None:
    assert cpu_limit_note(None) is None
    note = cpu_limit_note(0.2)
    assert note is not None
    assert note.startswith("running under a CPU limit of 0.20 cores")
    assert "/metrics" in note
    assert "docs/deploy.md" in note


def test_by_default_the_kernels_own_files_are_read() -> None:
    """Every other test reads a tree of its own; the agent reads where the kernel mounts the
    cgroup hierarchy and where it says which cgroup this process is in."""
    defaults = [p.default for p in inspect.signature(cpu_limit).parameters.values()]
    assert defaults == [Path("/sys/fs/cgroup"), Path("/proc/self/cgroup")]
