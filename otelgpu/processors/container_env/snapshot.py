"""The lookup tables `process()` reads: workload containers by ID and by pod/container name.

Built from `Record`s of live containers after every refresh (the source never turns a
stopped container into a record). Sandboxes are only ever a source of pod labels and
annotations, never a match target, so a pause container is never taken for a workload.
A workload container of a pod matches only while it runs in its pod's newest ready sandbox,
so neither a dead pod nor an older sandbox of the same pod can lend its labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from otelgpu.pdata import semconv
from otelgpu.processors.container_env.audit import Audit
from otelgpu.processors.container_env.records import Record

WorkloadKey = tuple[str, str, str]  # (namespace, pod, container)


@dataclass(frozen=True, slots=True)
class Match:
    """What a matched resource gains: the exported attributes, capped, and the k8s identity
    from the runtime's labels (used only to fill in names missing on a container.id match);
    `pod_uid` is the container's pod uid ("" when the runtime does not say), never exported;
    `container_id` the container it was composed from, so a match found by name says which
    container it is."""

    attributes: Mapping[str, str]
    identity: Mapping[str, str]
    pod_uid: str
    container_id: str


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
        """The snapshot of one runtime's records (live containers only)."""
        workloads: list[Record] = []
        sandboxes = _Sandboxes()
        for record in records:
            if record.sandbox:
                sandboxes.add(record)
            else:
                workloads.append(record)
        cache: dict[str, tuple[_CompositionKey, Match]] = {}
        by_id: dict[str, Match] = {}
        by_workload: dict[WorkloadKey, tuple[tuple[float, float], Match]] = {}
        for record in workloads:
            found, sandbox = sandboxes.of(record)
            if not found:
                continue  # a pod's container outside its pod's newest ready sandbox
            key = (record.revision, *((sandbox.id, sandbox.revision) if sandbox else ("", "")))
            cached = self._cache.get(record.id)
            match = cached[1] if cached and cached[0] == key else self._match(record, sandbox)
            cache[record.id] = (key, match)
            by_id[record.id] = match
            if record.namespace and record.pod and record.container:
                wkey = (record.namespace, record.pod, record.container)
                # Two live pods of one name (the old one still terminating): the newest
                # sandbox wins, then the newest container.
                age = (sandbox.created if sandbox else 0.0, record.created)
                if wkey not in by_workload or by_workload[wkey][0] <= age:
                    by_workload[wkey] = (age, match)
        self._cache = cache
        return Snapshot(by_id=by_id, by_workload={k: m for k, (_, m) in by_workload.items()})

    def _match(self, record: Record, sandbox: Record | None) -> Match:
        # The pod's owners first and outside the cap: a few names, never business data.
        attributes: dict[str, str] = dict(sandbox.owners) if sandbox is not None else {}
        # The pod's UID, from its sandbox (the CRI label `io.kubernetes.pod.uid`), which the
        # kubelet's pod-resources answer does not give: dcgm-exporter's `pod_uid`.
        uid = (sandbox.pod_uid if sandbox is not None else "") or record.pod_uid
        if uid and record.pod:
            attributes[semconv.K8S_POD_UID] = uid
        owned = len(attributes)
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
                if len(attributes) - owned >= self._max:
                    dropped += 1
                else:
                    attributes[prefix + key] = values[key]
        self._audit.dropped(dropped)
        return Match(
            attributes=attributes,
            identity=_identity(record),
            pod_uid=record.pod_uid,
            container_id=record.id,
        )


class _Sandboxes:
    """The ready sandboxes of one listing, and the newest one of each pod."""

    def __init__(self) -> None:
        self.by_id: dict[str, Record] = {}
        # (namespace, pod name) → pod UID → that pod's newest ready sandbox
        self._newest: dict[tuple[str, str], dict[str, Record]] = {}

    def add(self, sandbox: Record) -> None:
        self.by_id[sandbox.id] = sandbox
        by_uid = self._newest.setdefault((sandbox.namespace, sandbox.pod), {})
        known = by_uid.get(sandbox.pod_uid)
        if known is None or known.created <= sandbox.created:
            by_uid[sandbox.pod_uid] = sandbox

    def of(self, record: Record) -> tuple[bool, Record | None]:
        """Whether `record` may match, and its sandbox.

        A container that names its sandbox (containerd's `sandbox` field, the CRI
        annotation, dockershim's label) matches only when that sandbox is ready and the
        newest of its pod: a stopped sandbox is not listed as a record at all, and a sandbox
        the kubelet replaced leaves its containers behind. A pod's container that names none
        takes its pod's newest ready sandbox (same UID when known) and matches only if there
        is one. A container of no pod (plain docker) needs no sandbox.
        """
        if record.sandbox_id:
            sandbox = self.by_id.get(record.sandbox_id)
            return (sandbox is not None and self._is_newest(sandbox)), sandbox
        if not (record.namespace and record.pod):
            return True, None
        by_uid = self._newest.get((record.namespace, record.pod), {})
        candidates = [
            s for uid, s in by_uid.items() if not record.pod_uid or uid in ("", record.pod_uid)
        ]
        sandbox = max(candidates, key=lambda s: s.created, default=None)
        return sandbox is not None, sandbox

    def _is_newest(self, sandbox: Record) -> bool:
        by_uid = self._newest.get((sandbox.namespace, sandbox.pod), {})
        return by_uid.get(sandbox.pod_uid) is sandbox


def _identity(record: Record) -> dict[str, str]:
    names = (
        (semconv.K8S_NAMESPACE_NAME, record.namespace),
        (semconv.K8S_POD_NAME, record.pod),
        (semconv.K8S_CONTAINER_NAME, record.container),
    )
    return {name: value for name, value in names if value}
