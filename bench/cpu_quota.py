"""A CFS CPU quota for a benchmarked process, as a container's `resources.limits.cpu` sets
one (`bench/p7_scrape_never_waits.py --cpu-limit 200m`).

The kubelet turns a CPU limit into a quota of `limit * period` microseconds per period
(100 ms by default). Once the cgroup's threads have used that much, the kernel stops all of them
until the next period starts.

This needs root and a writable cgroup file system:
- cgroup v2: `cpu.max`, with the cpu controller enabled for the root's children;
- cgroup v1: `cpu.cfs_quota_us` in the `cpu` hierarchy.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from otelgpu.service.cpu_limit import CGROUP_ROOT, v1_cpu_mount

PERIOD_US = 100_000  # the kubelet's default --cpu-cfs-quota-period


def millicores(text: str) -> int:
    """A Kubernetes CPU quantity ("200m", "0.5", "1") in millicores, for argparse."""
    try:
        value = int(text[:-1]) if text.endswith("m") else round(float(text) * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a CPU quantity: {text!r} (e.g. 200m, 0.5, 1)"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a CPU limit must be above 0, not {text!r}")
    return value


@dataclass(frozen=True)
class Throttled:
    """A cgroup's `cpu.stat` counters: the periods it ran in, those it was stopped in, and for
    how long its threads were stopped in all (seconds)."""

    periods: int
    throttled: int
    seconds: float

    def __add__(self, other: Throttled) -> Throttled:
        return Throttled(
            self.periods + other.periods,
            self.throttled + other.throttled,
            self.seconds + other.seconds,
        )

    def __sub__(self, other: Throttled) -> Throttled:
        return Throttled(
            self.periods - other.periods,
            self.throttled - other.throttled,
            self.seconds - other.seconds,
        )


def parse_cpu_stat(text: str) -> Throttled:
    """v2 counts the time stopped in microseconds (`throttled_usec`), v1 in nanoseconds
    (`throttled_time`)."""
    fields = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
    if "throttled_usec" in fields:
        seconds = int(fields["throttled_usec"]) / 1e6
    else:
        seconds = int(fields["throttled_time"]) / 1e9
    return Throttled(int(fields["nr_periods"]), int(fields["nr_throttled"]), seconds)


class CpuQuota:
    """A new cgroup with a quota of `millicores`; `add` moves a process (all its threads) into
    it. The cgroup is removed on exit, once the processes in it have ended."""

    def __init__(self, millicores: int, root: Path = CGROUP_ROOT, name: str = "") -> None:
        self.millicores = millicores
        self.quota_us = millicores * PERIOD_US // 1000
        self._root = root
        self._name = name or f"otelgpu-bench-{os.getpid()}"
        self.path = Path()

    def __enter__(self) -> CpuQuota:
        try:
            if (self._root / "cgroup.controllers").exists():  # v2
                control = self._root / "cgroup.subtree_control"
                if "cpu" not in control.read_text().split():
                    control.write_text("+cpu")
                self.path = self._root / self._name
                self.path.mkdir()
                (self.path / "cpu.max").write_text(f"{self.quota_us} {PERIOD_US}")
            else:
                mount = v1_cpu_mount(self._root)
                if mount is None:
                    raise FileNotFoundError(f"no cpu hierarchy under {self._root}")
                self.path = mount / self._name
                self.path.mkdir()
                (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self.path / "cpu.cfs_quota_us").write_text(str(self.quota_us))
        except OSError as error:
            self._remove()
            raise SystemExit(
                f"--cpu-limit needs root and a writable cgroup file system ({self._root}): {error}"
            ) from error
        return self

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def throttled(self) -> Throttled:
        return parse_cpu_stat((self.path / "cpu.stat").read_text())

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._remove()

    def _remove(self) -> None:
        if self.path == Path() or not self.path.is_dir():
            return
        for _ in range(50):  # a process that just ended may still be counted for a moment
            with contextlib.suppress(OSError):
                self.path.rmdir()
                return
            time.sleep(0.1)
