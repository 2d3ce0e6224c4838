"""Process → container: the container ID in `<host_proc>/<pid>/cgroup`.

Handles cgroup v1 (one line per hierarchy) and v2 (`0::<path>`), and the path forms the
runtimes write: docker (`/docker/<id>`, `docker-<id>.scope`), containerd/CRI
(`cri-containerd-<id>.scope`, `/kubepods/.../pod<uid>/<id>`), CRI-O (`crio-<id>.scope`),
podman (`libpod-<id>.scope`), under systemd slices or the cgroupfs driver.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

# A path segment that names a container: an optional runtime prefix, 64 hex digits, and an
# optional systemd `.scope` suffix. conmon (CRI-O's monitor) is not the container itself.
_SEGMENT = re.compile(
    r"^(?:(?P<prefix>docker|cri-containerd|crio|libpod|containerd)-)?"
    r"(?P<id>[0-9a-f]{64})(?:\.scope)?$"
)


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


class ContainerResolver:
    """pid → container ID through `<host_proc>/<pid>/cgroup`, cached while the pid lives.

    Blocking file reads: called from the receiver's worker thread only.
    """

    def __init__(self, host_proc: str) -> None:
        self._root = Path(host_proc)
        self._cache: dict[int, str] = {}

    def container_id(self, pid: int) -> str:
        """The pid's container ID ("" for a host process or a pid that already exited)."""
        cid = self._cache.get(pid)
        if cid is None:
            try:
                text = (self._root / str(pid) / "cgroup").read_text()
            except OSError:
                # Exited between the NVML answer and now, or not readable yet: not cached, so
                # a pid that is still there is looked up again at the next collection.
                return ""
            cid = self._cache[pid] = container_id_from_cgroup(text)
        return cid

    def retain(self, pids: Iterable[int]) -> None:
        """Forgets pids not in `pids` (a reused pid must be looked up again)."""
        keep = set(pids)
        for pid in [p for p in self._cache if p not in keep]:
            del self._cache[pid]
