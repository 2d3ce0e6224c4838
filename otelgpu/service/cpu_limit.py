"""The CPU limit this process runs under: the CFS quota a container's `resources.limits.cpu`
becomes. Read once at start, so that the log says it.

Under a quota the kernel lets a cgroup's threads run for `quota` microseconds of CPU per
`period` (100 ms unless the kubelet was told otherwise), then stops all of them until the next
period begins. At 10k series a collection cycle is a burst of tens of milliseconds of CPU. Below
about one core, that burst uses up a period's share, and a scrape that arrives then waits for
the next period. The thread that serves `/metrics` waits too, though it never waits for the
pipeline otherwise (docs/deploy.md, "Resources"). The agent cannot change its quota, so it
names the quota where someone looking for slow scrapes will look.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
_V1_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def cpu_limit(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> float | None:
    """The cores this process may use, as its cgroup's CFS quota over its period (the
    smallest along the path to the root, as the kernel applies each), or None where no quota
    is set or none can be read.

    cgroup v2: `cpu.max` ("max 100000" or "20000 100000"). v1: `cpu.cfs_quota_us` (-1: none)
    over `cpu.cfs_period_us`, in the `cpu` hierarchy. A container usually sees its own cgroup
    at the mount's root, and its /proc/self/cgroup may name a path the mount lacks: the
    directories that exist are read."""
    limits = [limit for directory in _directories(root, self_cgroup) if (limit := _read(directory))]
    return min(limits, default=None)


def cpu_limit_note(limit: float | None) -> str | None:
    """The start-up log line for a limit, or None where there is none."""
    if limit is None:
        return None
    return (
        f"running under a CPU limit of {limit:.2f} cores (a CFS quota): once a collection cycle "
        "has used up a period's share, every thread waits for the next period, the one serving "
        "/metrics too. Below 1 core, scrapes of a node with thousands of series wait up to the "
        "rest of the period, ~80 ms (docs/deploy.md, Resources)"
    )


def v1_cpu_mount(root: Path = CGROUP_ROOT) -> Path | None:
    """Where cgroup v1's `cpu` hierarchy is mounted under `root` (alone or with `cpuacct`), or
    None."""
    return next((root / name for name in _V1_MOUNTS if (root / name).is_dir()), None)


def _directories(root: Path, self_cgroup: Path) -> list[Path]:
    """Where this process's quota may be set: its cgroup's directory and each parent up to the
    mount (those that exist), or the mount alone."""
    try:
        lines = self_cgroup.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    if (root / "cgroup.controllers").exists():  # v2: one hierarchy, "0::/path"
        mount = root
        paths = [line[3:] for line in lines if line.startswith("0::")]
    else:
        v1 = v1_cpu_mount(root)
        if v1 is None:
            return []
        mount = v1
        paths = [
            parts[2]
            for line in lines
            if len(parts := line.split(":", 2)) == 3 and "cpu" in parts[1].split(",")
        ]
    here = mount / paths[0].lstrip("/") if paths else mount
    found = [mount]
    while here != mount and mount in here.parents:
        if here.is_dir():
            found.append(here)
        here = here.parent
    return found


def _read(directory: Path) -> float | None:
    """The quota set in one directory, in cores, or None."""
    with contextlib.suppress(OSError, ValueError, IndexError, ZeroDivisionError):
        if (directory / "cpu.max").exists():
            quota, period = (directory / "cpu.max").read_text(encoding="ascii").split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota_us = int((directory / "cpu.cfs_quota_us").read_text(encoding="ascii"))
        period_us = int((directory / "cpu.cfs_period_us").read_text(encoding="ascii"))
        return None if quota_us <= 0 else quota_us / period_us
    return None
