"""GPU processes running outside their GPU's allocation: the squatter check.

k8s_attributes notes who the kubelet allocated a GPU to (`notes.GPU_HOLDERS`). A process on
that GPU whose container (found by `container.id` in the runtime's listing) is none of those
holders, or that runs in no container at all (the host), is outside the allocation: the
processor counts such processes in `otelgpu_gpu_processes_outside_allocation`, and each is
logged here once. A process whose container the runtime does not know yet cannot be told.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from otelgpu.pdata import semconv
from otelgpu.processors.container_env.snapshot import Match, Snapshot

_LOGGED_MAX = 4096  # (GPU, pid) pairs remembered as logged (bounds memory if pids churn)
Squatter = tuple[object, object]  # (GPU, pid)


class OutsideAllocation:
    """Finds the GPU processes outside their GPU's allocation, logging each once."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._logged: set[Squatter] = set()

    def listed(
        self,
        device: object,
        listed: tuple[object, ...],
        snapshot: Snapshot,
        holders: Collection[object],
    ) -> list[Squatter]:
        """The (GPU, pid) of each process the receiver listed on a GPU's own resource
        (`notes.GPU_PROCESSES`, no per-process series) that runs outside its allocation."""
        found = []
        for entry in listed:
            if not (isinstance(entry, tuple) and len(entry) == 2):
                continue
            pid, container = entry
            cid = str(container)
            match = snapshot.by_id.get(cid) if cid else None
            reason = "by_id" if match is not None else ""
            squatter = self.process(device, pid, cid, match, reason, holders)
            if squatter is not None:
                found.append(squatter)
        return found

    def process(
        self,
        device: object,
        pid: object,
        cid: str,
        match: Match | None,
        reason: str,
        holders: Collection[object],
    ) -> Squatter | None:
        """The (GPU, pid) of a GPU process (in container `cid`, "" for none) running outside
        the allocation k8s_attributes noted; None when it runs inside, or when that cannot be
        told (its container is not known to the runtime yet)."""
        if match is not None and reason == "by_id":
            identity = match.identity
            where = (
                identity.get(semconv.K8S_NAMESPACE_NAME, ""),
                identity.get(semconv.K8S_POD_NAME, ""),
                identity.get(semconv.K8S_CONTAINER_NAME, ""),
            )
            if where in holders:
                return None
            container = "/".join(where) if all(where) else cid
        elif not cid:
            container = "the host"
        else:
            return None
        key = (device, pid)
        if key not in self._logged:
            if len(self._logged) >= _LOGGED_MAX:
                self._logged.clear()
            self._logged.add(key)
            allocated = ", ".join(sorted(_holder_text(h) for h in holders)) or "nobody"
            self._log.warning(
                "process %s of %s uses GPU %s, which the kubelet allocated to %s",
                key[1],
                container,
                key[0],
                allocated,
            )
        return key


def _holder_text(holder: object) -> str:
    return "/".join(map(str, holder)) if isinstance(holder, tuple) else str(holder)
