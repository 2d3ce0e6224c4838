"""Process → container (and Slurm job): what `<host_proc>/<pid>/cgroup` names.

Handles cgroup v1 (one line per hierarchy) and v2 (`0::<path>`), and the path forms the
runtimes write: docker (`/docker/<id>`, `docker-<id>.scope`), containerd/CRI
(`cri-containerd-<id>.scope`, `/kubepods/.../pod<uid>/<id>`), CRI-O (`crio-<id>.scope`),
podman (`libpod-<id>.scope`), under systemd slices or the cgroupfs driver.

Slurm's cgroup plugins put every task in a job/step cgroup, so a Slurm node needs no prolog
script to tell which job a GPU process belongs to:
- cgroup/v1: `<prepend>/uid_<uid>/job_<id>/step_<step>/task_<n>` (prepend `/slurm` by default);
- cgroup/v2: `<slice>/slurmstepd.scope/job_<id>/step_<step>/user/task_<n>`;
- cgroup/v2, Slurm 26.05+: the job directory is its SLUID (`s` + 13 Crockford base-32
  characters, e.g. `sEKNKTV3WPV500`) unless `CgroupJobIdPaths=yes`; the numeric job ID is not
  in the path then, so the SLUID is reported instead (`slurm.job.sluid`).
`<step>` is a number, `batch`, `extern`, `interactive` (plus `+<n>` for a heterogeneous
step component); it is reported as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue

# A path segment that names a container: an optional runtime prefix, 64 hex digits, and an
# optional systemd `.scope` suffix. conmon (CRI-O's monitor) is not the container itself.
_SEGMENT = re.compile(
    r"^(?:(?P<prefix>docker|cri-containerd|crio|libpod|containerd)-)?"
    r"(?P<id>[0-9a-f]{64})(?:\.scope)?$"
)


# `/job_<id>` (v1 under `uid_<uid>`, v2 under `slurmstepd.scope`), or a v2 SLUID directory,
# which is only taken with a `step_` child below it (a bare `s…` name is too common).
_SLURM_JOB = re.compile(r"/job_(?P<job>\d+)(?:/step_(?P<step>[^/]+))?(?:/|$)")
_SLURM_SLUID = re.compile(r"/(?P<sluid>s[0-9A-HJKMNP-TV-Z]{13})/step_(?P<step>[^/]+)(?:/|$)")


def slurm_from_cgroup(text: str) -> dict[str, AttrValue]:
    """The Slurm job (or SLUID) and step a `/proc/<pid>/cgroup` file names; {} when none.

    The first line that names a job wins (cgroup v1 repeats the same path per controller)."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        found: dict[str, AttrValue] = {}
        job = _SLURM_JOB.search(path)
        if job:
            found[semconv.SLURM_JOB_ID] = job["job"]
        else:
            sluid = _SLURM_SLUID.search(path)
            if sluid is None:
                continue
            job = sluid
            found[semconv.SLURM_JOB_SLUID] = sluid["sluid"]
        if job["step"]:
            found[semconv.SLURM_STEP_ID] = job["step"]
        return found
    return {}


def container_id_from_cgroup(text: str) -> str:
    """The container ID a `/proc/<pid>/cgroup` file names, or "" for a host process.

    The deepest matching path segment wins: with nested cgroups (docker-in-docker, a
    systemd scope inside a pod slice) the innermost container is the process's own.
    """
    for line in text.splitlines():
        _, _, path = line.partition(":")
        _, _, path = path.partition(":")  # `<id>:<controllers>:<path>`
        found = ""
        for segment in path.split("/"):
            match = _SEGMENT.match(segment)
            if match:
                found = match.group("id")
        if found:
            return found
    return ""


_NOTHING: Mapping[str, AttrValue] = {semconv.CONTAINER_ID: ""}


class ContainerResolver:
    """pid → container ID (and Slurm job/step) through `<host_proc>/<pid>/cgroup`, cached
    while the pid lives.

    Blocking file reads: called from the receiver's worker thread only.
    """

    def __init__(self, host_proc: str) -> None:
        self._root = Path(host_proc)
        self._cache: dict[int, Mapping[str, AttrValue]] = {}

    def container_id(self, pid: int) -> str:
        """The pid's container ID ("" for a host process or a pid that already exited)."""
        return str(self.attributes(pid)[semconv.CONTAINER_ID])

    def attributes(self, pid: int) -> Mapping[str, AttrValue]:
        """The process resource's attributes its cgroup gives: `container.id` ("" for a host
        process or a pid that already exited) and, for a Slurm task, `slurm.job.id` (or
        `slurm.job.sluid`) and `slurm.step.id`."""
        found = self._cache.get(pid)
        if found is None:
            try:
                text = (self._root / str(pid) / "cgroup").read_text()
            except OSError:
                # Exited between the NVML answer and now, or not readable yet: not cached, so
                # a pid that is still there is looked up again at the next collection.
                return _NOTHING
            found = self._cache[pid] = {
                semconv.CONTAINER_ID: container_id_from_cgroup(text),
                **slurm_from_cgroup(text),
            }
        return found

    def retain(self, pids: Iterable[int]) -> None:
        """Forgets pids not in `pids` (a reused pid must be looked up again)."""
        keep = set(pids)
        for pid in [p for p in self._cache if p not in keep]:
            del self._cache[pid]
