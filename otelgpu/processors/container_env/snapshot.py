"""The lookup tables `process()` reads: workload containers by ID and by pod/container name.

Built from `Record`s after every refresh; sandboxes are only ever a source of pod labels and
annotations, never a match target, so a pause container is never taken for a workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from otelgpu import semconv
from otelgpu.processors.container_env.audit import Audit
from otelgpu.processors.container_env.records import Record

WorkloadKey = tuple[str, str, str]  # (namespace, pod, container)


@dataclass(frozen=True, slots=True)
class Match:
    """What a matched resource gains: the exported attributes, capped, and the k8s identity
    from the runtime's labels (used only to fill in names missing on a container.id match)."""

    attributes: Mapping[str, str]
    identity: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Immutable lookup tables; replaced whole, so a reader never sees half a refresh."""

    by_id: Mapping[str, Match] = field(default_factory=dict)
    by_workload: Mapping[WorkloadKey, Match] = field(default_factory=dict)

    @staticmethod
    def merge(snapshots: Iterable[Snapshot]) -> Snapshot:
        """One snapshot over several runtimes (auto mode on a host running both)."""
        by_id: dict[str, Match] = {}
        by_workload: dict[WorkloadKey, Match] = {}
        for snap in snapshots:
            by_id.update(snap.by_id)
            by_workload.update(snap.by_workload)
        return Snapshot(by_id=by_id, by_workload=by_workload)


# A composition stays valid while the container and its sandbox keep their revisions.
_CompositionKey = tuple[str, str, str]


class SnapshotComposer:
    """Joins workload containers to their sandboxes and caps the attribute set.

    Compositions are reused while neither record changed, so the caps are counted once
    per container, not once per refresh.
    """

    def __init__(self, audit: Audit, max_attributes: int) -> None:
        self._audit = audit
        self._max = max_attributes
        self._cache: dict[str, tuple[_CompositionKey, Match]] = {}

    def compose(self, records: Iterable[Record]) -> Snapshot:
        """The snapshot of one runtime's records."""
        workloads: list[Record] = []
        sandboxes_by_id: dict[str, Record] = {}
        sandboxes_by_pod: dict[tuple[str, str], list[Record]] = {}
        for record in records:
            if record.sandbox:
                sandboxes_by_id[record.id] = record
                sandboxes_by_pod.setdefault((record.namespace, record.pod), []).append(record)
            else:
                workloads.append(record)
        cache: dict[str, tuple[_CompositionKey, Match]] = {}
        by_id: dict[str, Match] = {}
        by_workload: dict[WorkloadKey, tuple[float, Match]] = {}
        for record in workloads:
            sandbox = _sandbox_of(record, sandboxes_by_id, sandboxes_by_pod)
            key = (record.revision, *((sandbox.id, sandbox.revision) if sandbox else ("", "")))
            cached = self._cache.get(record.id)
            match = cached[1] if cached and cached[0] == key else self._match(record, sandbox)
            cache[record.id] = (key, match)
            by_id[record.id] = match
            if record.namespace and record.pod and record.container:
                wkey = (record.namespace, record.pod, record.container)
                # A restarted container leaves its old record behind: the newest one wins.
                if wkey not in by_workload or by_workload[wkey][0] <= record.created:
                    by_workload[wkey] = (record.created, match)
        self._cache = cache
        return Snapshot(by_id=by_id, by_workload={k: m for k, (_, m) in by_workload.items()})

    def _match(self, record: Record, sandbox: Record | None) -> Match:
        attributes: dict[str, str] = {}
        sections: list[tuple[str, Mapping[str, str]]] = [
            (semconv.CONTAINER_ENV_PREFIX, record.env),
            (semconv.CONTAINER_LABEL_PREFIX, record.labels),
        ]
        if sandbox is not None:
            sections.append((semconv.POD_LABEL_PREFIX, sandbox.labels))
            sections.append((semconv.POD_ANNOTATION_PREFIX, sandbox.annotations))
        dropped = 0
        for prefix, values in sections:
            for key in sorted(values):
                if len(attributes) >= self._max:
                    dropped += 1
                else:
                    attributes[prefix + key] = values[key]
        self._audit.dropped(dropped)
        return Match(attributes=attributes, identity=_identity(record))


def _sandbox_of(
    record: Record,
    by_id: Mapping[str, Record],
    by_pod: Mapping[tuple[str, str], list[Record]],
) -> Record | None:
    """The container's sandbox: by the ID it names, else by pod (same UID when known, newest)."""
    if record.sandbox_id in by_id:
        return by_id[record.sandbox_id]
    if not (record.namespace and record.pod):
        return None
    candidates = by_pod.get((record.namespace, record.pod), [])
    if record.pod_uid:
        candidates = [c for c in candidates if c.pod_uid in ("", record.pod_uid)]
    return max(candidates, key=lambda c: c.created, default=None)


def _identity(record: Record) -> dict[str, str]:
    names = (
        (semconv.K8S_NAMESPACE_NAME, record.namespace),
        (semconv.K8S_POD_NAME, record.pod),
        (semconv.K8S_CONTAINER_NAME, record.container),
    )
    return {name: value for name, value in names if value}
