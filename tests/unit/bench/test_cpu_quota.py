"""`bench/cpu_quota.py`: the CPU quantity parsed as Kubernetes writes it, the quota written as
the kubelet writes it (cgroup v2 and v1 layouts), and the throttling counters read back."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.cpu_quota import CpuQuota, Throttled, millicores, parse_cpu_stat


@pytest.mark.parametrize(("text", "value"), [("200m", 200), ("1", 1000), ("0.5", 500)])
def test_cpu_quantities(text: str, value: int) -> None:
    assert millicores(text) == value


@pytest.mark.parametrize("text", ["", "two", "0", "-100m", "m"])
def test_what_is_not_a_cpu_limit_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        millicores(text)


def test_cpu_stat_in_both_layouts() -> None:
    v2 = "usage_usec 9\nnr_periods 1130\nnr_throttled 301\nthrottled_usec 35786787\n"
    v1 = "nr_periods 1130\nnr_throttled 301\nthrottled_time 35786787405\nnr_bursts 0\n"
    assert parse_cpu_stat(v2) == Throttled(1130, 301, pytest.approx(35.786787))
    assert parse_cpu_stat(v1) == Throttled(1130, 301, pytest.approx(35.786787405))
    assert parse_cpu_stat(v1) - Throttled(130, 1, 0.5) + Throttled(0, 0, 0.5) == Throttled(
        1000, 300, pytest.approx(35.786787405)
    )


def test_v2_quota_is_cpu_max_with_the_controller_enabled(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory")
    (tmp_path / "cgroup.subtree_control").write_text("memory")
    quota = CpuQuota(200, tmp_path, name="t").__enter__()
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"
    assert (tmp_path / "t" / "cpu.max").read_text() == "20000 100000"
    quota.add(42)
    assert (tmp_path / "t" / "cgroup.procs").read_text() == "42"


def test_v1_quota_in_the_cpu_hierarchy(tmp_path: Path) -> None:
    (tmp_path / "cpu,cpuacct").mkdir()
    CpuQuota(1500, tmp_path, name="t").__enter__()
    assert (tmp_path / "cpu,cpuacct" / "t" / "cpu.cfs_quota_us").read_text() == "150000"
    assert (tmp_path / "cpu,cpuacct" / "t" / "cpu.cfs_period_us").read_text() == "100000"


def test_no_cgroup_file_system_says_what_is_needed(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="needs root and a writable cgroup file system"):
        CpuQuota(200, tmp_path, name="t").__enter__()
