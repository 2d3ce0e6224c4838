"""pid → container ID from /proc/<pid>/cgroup, over the path forms real nodes write."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.receivers.nvml.cgroup import ContainerResolver, container_id_from_cgroup

ID = "3f2b9c1d0e8a7f6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b"
OTHER = "0123456789abcdef" * 4
POD = "pod5f8a3c2e_1b4d_4e6f_9a7b_2c3d4e5f6a7b"

CASES = [
    ("docker, cgroup v2, systemd driver", f"0::/system.slice/docker-{ID}.scope\n", ID),
    ("docker, cgroup v2, cgroupfs driver", f"0::/docker/{ID}\n", ID),
    (
        "docker, cgroup v1",
        f"12:memory:/docker/{ID}\n11:cpu,cpuacct:/docker/{ID}\n1:name=systemd:/docker/{ID}\n",
        ID,
    ),
    (
        "containerd CRI, v2, systemd slices",
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-"
        f"{POD}.slice/cri-containerd-{ID}.scope\n",
        ID,
    ),
    (
        "containerd CRI, v1, cgroupfs",
        f"4:memory:/kubepods/burstable/pod5f8a3c2e-1b4d-4e6f-9a7b-2c3d4e5f6a7b/{ID}\n",
        ID,
    ),
    (
        "CRI-O, v2, systemd slices",
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-{POD}.slice/"
        f"crio-{ID}.scope\n",
        ID,
    ),
    (
        "CRI-O conmon is not the container",
        f"0::/kubepods.slice/kubepods-{POD}.slice/crio-conmon-{ID}.scope\n",
        "",
    ),
    ("podman", f"0::/machine.slice/libpod-{ID}.scope/container\n", ID),
    ("docker-in-docker: innermost wins", f"0::/docker/{OTHER}/docker/{ID}\n", ID),
    (
        "kind node (docker) running a CRI pod",
        f"0::/system.slice/docker-{OTHER}.scope/kubepods/besteffort/pod1/{ID}\n",
        ID,
    ),
    ("host process, v2", "0::/user.slice/user-1000.slice/session-3.scope\n", ""),
    ("host process, v1", "12:memory:/\n11:cpu:/system.slice/sshd.service\n", ""),
    ("systemd service", "0::/system.slice/containerd.service\n", ""),
    ("empty file", "", ""),
    ("short hex is not an id", "0::/docker/abc123\n", ""),
    ("uppercase hex is not docker's", f"0::/docker/{ID.upper()}\n", ""),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_container_id_from_cgroup(text: str, expected: str) -> None:
    assert container_id_from_cgroup(text) == expected


def test_resolver_reads_host_proc_and_caches(tmp_path: Path) -> None:
    (tmp_path / "10").mkdir()
    cgroup = tmp_path / "10" / "cgroup"
    cgroup.write_text(f"0::/system.slice/docker-{ID}.scope\n")
    resolver = ContainerResolver(str(tmp_path))

    assert resolver.container_id(10) == ID
    cgroup.write_text("0::/\n")
    assert resolver.container_id(10) == ID  # cached while the pid lives
    resolver.retain([])
    assert resolver.container_id(10) == ""  # forgotten, read again
    assert resolver.container_id(99) == ""  # no such pid: a host/unknown process
