"""The CPU limit read from a cgroup v1 `cpu` hierarchy whose cgroup names hold colons, as
/proc/self/cgroup writes them (`id:controllers:path`, the path itself unescaped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.service.cpu_limit import cpu_limit


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
