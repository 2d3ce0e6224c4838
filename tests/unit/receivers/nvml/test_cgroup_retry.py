"""A pid whose cgroup file could not be read is looked up again, not cached as a host process.

The defect: one failed read (a transient EACCES, a /proc not mounted yet, a pid listed by NVML
a moment before its /proc entry is readable) cached "" for the pid's whole life, so its
container was never named.
"""

from __future__ import annotations

from pathlib import Path

from otelgpu.receivers.nvml.cgroup import ContainerResolver

CID = "a" * 64


def test_a_failed_read_is_retried_on_the_next_lookup(tmp_path: Path) -> None:
    resolver = ContainerResolver(str(tmp_path))
    assert resolver.container_id(4242) == ""  # /proc/4242/cgroup unreadable (absent) for now
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{CID}.scope\n")
    assert resolver.container_id(4242) == CID


def test_a_host_process_read_successfully_is_cached(tmp_path: Path) -> None:
    resolver = ContainerResolver(str(tmp_path))
    (tmp_path / "7").mkdir()
    cgroup = tmp_path / "7" / "cgroup"
    cgroup.write_text("0::/user.slice/session-1.scope\n")
    assert resolver.container_id(7) == ""
    cgroup.write_text(f"0::/docker/{CID}\n")  # not read again while the pid lives
    assert resolver.container_id(7) == ""
    resolver.retain([])  # the pid is gone: a reused pid is looked up afresh
    assert resolver.container_id(7) == CID
