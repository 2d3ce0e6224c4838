"""Turns a kubelet `/stats/summary` document into a batch, driven by the metric catalog.

The summary is the kubelet's `statsapi/v1alpha1` Summary: a `node` (with `systemContainers`,
which this receiver does not report) and `pods`, each with `containers` and `volume` entries.
Anything may be missing: a pod just scheduled has no stats yet, a container may lack `cpu` or
`memory`, a field may be absent or null. What is there is emitted; every entry that yields
nothing, or series missing a label, is a `Gap` the reading counts by entity and reason.
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from otelgpu.pdata import semconv
from otelgpu.pdata.model import (
    Attributes,
    Batch,
    Metric,
    MetricKind,
    NumberDataPoint,
    ResourceMetrics,
)
from otelgpu.receivers.kubelet_stats.metrics import (
    CATALOGS,
    DIRECTION,
    FAULT_TYPE,
    K8S_PVC_NAME,
    K8S_VOLUME_NAME,
    NETWORK_INTERFACE_NAME,
    Group,
    MetricSpec,
    Naming,
)

SCOPE = "otelgpu.kubelet_stats"
_DIRECTIONS = (("receive", "rx"), ("transmit", "tx"))
_TIME_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")
Json = Mapping[str, Any]
_NO_ATTRIBUTES: Attributes = {}  # shared by every point without attributes; never mutated


def parse_time(value: object) -> int:
    """RFC 3339 (Go's, up to nanoseconds) → Unix nanoseconds; 0 when absent or malformed."""
    return _parse_text(value) if isinstance(value, str) else 0


# A summary repeats a few distinct times thousands of times (every block of every container
# sampled in one housekeeping pass): parsing each distinct text once is most of a read's cost
# saved. Bounded: a node's summary holds a few thousand distinct times at most.
@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> int:
    match = _TIME_RE.match(value)
    if match is None:
        return 0
    offset = "+00:00" if match.group(3) == "Z" else match.group(3)
    try:
        base = datetime.datetime.fromisoformat(match.group(1) + offset)
    except ValueError:
        return 0
    return int(base.timestamp()) * 1_000_000_000 + int((match.group(2) or "").ljust(9, "0"))


class Gap(Enum):
    """Why an entry of the summary yields no series, or series missing a label."""

    EMPTY_NAME = "empty_name"  # no name (a pod: no podRef name or namespace): skipped
    NO_STATS_YET = "no_stats_yet"  # named, but no enabled metric has a value yet
    NO_NODE_NAME = "no_node_name"  # the summary names no node: series lack k8s.node.name
    NO_UID = "no_uid"  # a pod without podRef.uid: its identity is its namespace and name
    DUPLICATE_POD = "duplicate_pod"  # a pod name listed twice: the older uid is left out


@dataclass
class Reading:
    """One summary turned into resources, plus the gaps it had: (entity, reason) → how many
    entries, and the first entry of each, for the log; and each pod it names (namespace,
    name), with whether its entries gave any series (`pods`)."""

    resources: list[ResourceMetrics] = field(default_factory=list)
    gaps: dict[tuple[Group, Gap], int] = field(default_factory=dict)
    examples: dict[tuple[Group, Gap], str] = field(default_factory=dict)
    pods: dict[tuple[str, str], bool] = field(default_factory=dict)

    @property
    def batch(self) -> Batch:
        return tuple(self.resources)

    def gap(self, group: Group, gap: Gap, example: str) -> None:
        key = (group, gap)
        self.gaps[key] = self.gaps.get(key, 0) + 1
        self.examples.setdefault(key, example)


class SummaryReader:
    """Reads the enabled catalog metrics out of summaries (pure: no I/O, never raises).

    Each resource's `identity` is what the entity is: the node by name, a pod by its uid (a
    pod recreated under its name is another pod), a container or volume by its pod's uid and
    its own name. Attributes added later (container_env's labels) never change it.
    """

    def __init__(self, enabled: frozenset[str], naming: Naming = Naming.SEMCONV) -> None:
        catalog = CATALOGS[naming]
        self._specs = {
            group: tuple(s for s in catalog if s.group is group and s.name in enabled)
            for group in Group
        }
        # Per group, the enabled specs by the summary block they read, in catalog order: each
        # block is looked up and its time parsed once per entity.
        self._blocks: dict[Group, tuple[tuple[str, tuple[MetricSpec, ...]], ...]] = {}
        for group, specs in self._specs.items():
            blocks: dict[str, list[MetricSpec]] = {}
            for spec in specs:
                blocks.setdefault(spec.block, []).append(spec)
            self._blocks[group] = tuple((b, tuple(specs)) for b, specs in blocks.items())
        # Whether a pod's entries can give series at all (not with metric_groups: [node])
        self.reads_pods = any(self._blocks[g] for g in (Group.POD, Group.CONTAINER, Group.VOLUME))

    def read(self, summary: Json, now_ns: int) -> Reading:
        """Every resource the summary holds data for; `now_ns` stands in for missing times."""
        out = Reading()
        node = _object(summary.get("node"))
        node_name = _text(node.get("nodeName"))
        # `host.name` too: GPU series name their node by it (`Hostname` in dcgm naming), so
        # node-level joins of GPU and kubelet series find one label in both namings.
        base: dict[str, str] = (
            {semconv.K8S_NODE_NAME: node_name, semconv.HOST_NAME: node_name} if node_name else {}
        )
        if not node_name:
            out.gap(Group.NODE, Gap.NO_NODE_NAME, "the summary's node.nodeName is empty")
        self._add(out, base, node, Group.NODE, ("node", node_name), now_ns)
        for pod, namespace, name, uid in _newest_pods(out, _objects(summary.get("pods"))):
            emitted = len(out.resources)
            resource = {**base, semconv.K8S_NAMESPACE_NAME: namespace, semconv.K8S_POD_NAME: name}
            key: tuple[str, ...] = (uid,) if uid else (namespace, name)
            if uid:
                resource[semconv.K8S_POD_UID] = uid
            else:
                out.gap(Group.POD, Gap.NO_UID, f"{namespace}/{name}")
            self._add(out, resource, pod, Group.POD, ("pod", *key), now_ns)
            self._children(out, resource, pod, key, now_ns)
            out.pods[(namespace, name)] = len(out.resources) > emitted
        return out

    def _children(
        self, out: Reading, pod_resource: dict[str, str], pod: Json, key: tuple[str, ...], now: int
    ) -> None:
        where = f"{pod_resource[semconv.K8S_NAMESPACE_NAME]}/{pod_resource[semconv.K8S_POD_NAME]}"
        if self._specs[Group.CONTAINER]:
            for container in _objects(pod.get("containers")):
                name = _text(container.get("name"))
                if not name:
                    out.gap(Group.CONTAINER, Gap.EMPTY_NAME, f"a container of pod {where}")
                    continue
                resource = {**pod_resource, semconv.K8S_CONTAINER_NAME: name}
                identity = ("container", *key, name)
                self._add(out, resource, container, Group.CONTAINER, identity, now)
        if self._specs[Group.VOLUME]:
            for volume in _objects(pod.get("volume")):
                name = _text(volume.get("name"))
                if not name:
                    out.gap(Group.VOLUME, Gap.EMPTY_NAME, f"a volume of pod {where}")
                    continue
                resource = {**pod_resource, K8S_VOLUME_NAME: name}
                if claim := _text(_object(volume.get("pvcRef")).get("name")):
                    resource[K8S_PVC_NAME] = claim
                self._add(out, resource, volume, Group.VOLUME, ("volume", *key, name), now)

    def _add(
        self,
        out: Reading,
        resource: Attributes,
        stats: Json,
        group: Group,
        identity: tuple[str, ...],
        now: int,
    ) -> None:
        blocks = self._blocks[group]
        if not blocks:
            return
        start = parse_time(stats.get("startTime"))
        metrics = []
        for name, specs in blocks:
            block = _object(stats.get(name)) if name else stats
            if block:
                time_ns = parse_time(block.get("time")) or now
                for spec in specs:
                    if (metric := _metric(spec, block, time_ns, start)) is not None:
                        metrics.append(metric)
        if not metrics:
            out.gap(group, Gap.NO_STATS_YET, _describe(resource))
            return
        out.resources.append(
            ResourceMetrics(
                resource=resource, metrics=tuple(metrics), scope=SCOPE, identity=identity
            )
        )


def _newest_pods(out: Reading, pods: Iterable[Json]) -> list[tuple[Json, str, str, str]]:
    """(pod, namespace, name, uid) of each named pod; of a name listed more than once (a pod
    deleted and recreated between two housekeeping passes of the kubelet), only the one that
    started last (the first listed of equals): one name, one set of series."""
    chosen: dict[tuple[str, str], tuple[Json, str, str, str]] = {}
    for pod in pods:
        ref = _object(pod.get("podRef"))
        name, namespace = _text(ref.get("name")), _text(ref.get("namespace"))
        if not (name and namespace):
            out.gap(Group.POD, Gap.EMPTY_NAME, f"a pod with podRef {_brief(ref)}")
            continue
        entry = (pod, namespace, name, _text(ref.get("uid")))
        other = chosen.get((namespace, name))
        if other is not None:
            older, entry = (entry, other) if _started(other[0]) >= _started(pod) else (other, entry)
            out.gap(Group.POD, Gap.DUPLICATE_POD, f"{namespace}/{name} uid {older[3] or '?'}")
        chosen[(namespace, name)] = entry
    return list(chosen.values())


def _started(pod: Json) -> int:
    return parse_time(pod.get("startTime"))


def _describe(resource: Attributes) -> str:
    keys = (
        semconv.K8S_NAMESPACE_NAME,
        semconv.K8S_POD_NAME,
        semconv.K8S_CONTAINER_NAME,
        K8S_VOLUME_NAME,
    )
    parts = [str(resource[k]) for k in keys if k in resource]
    return "/".join(parts) or f"node {resource.get(semconv.K8S_NODE_NAME, '')}".strip()


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _metric(spec: MetricSpec, block: Json, time_ns: int, start_ns: int) -> Metric | None:
    start = start_ns if spec.kind is MetricKind.SUM and start_ns < time_ns else 0
    if spec.per_interface:
        points = tuple(_interface_points(spec, block, time_ns, start))
    elif spec.fault_types:
        points = _fault_points(block, spec.field, time_ns, start)
    else:
        value = _number(block.get(spec.field))
        scaled = value if value is None or spec.scale == 1.0 else value * spec.scale
        points = () if scaled is None else (_point(_NO_ATTRIBUTES, time_ns, scaled, start),)
    if not points:
        return None
    return Metric(
        name=spec.name,
        unit=spec.unit,
        description=spec.description,
        kind=spec.kind,
        points=points,
        monotonic=spec.monotonic,
    )


def _interface_points(
    spec: MetricSpec, block: Json, time_ns: int, start: int
) -> Iterable[NumberDataPoint]:
    # `interfaces` lists them all; the top-level fields repeat the default interface only, so
    # they are used just when an older kubelet sends no list.
    interfaces = list(_objects(block.get("interfaces"))) or [block]
    for interface in interfaces:
        name = _text(interface.get("name"))
        for direction, prefix in _DIRECTIONS:
            value = _number(interface.get(prefix + spec.field))
            if name and value is not None:
                attrs = {NETWORK_INTERFACE_NAME: name, DIRECTION: direction}
                yield _point(attrs, time_ns, value, start)


_MAJOR: Attributes = {FAULT_TYPE: "major"}
_MINOR: Attributes = {FAULT_TYPE: "minor"}


def _fault_points(block: Json, field: str, time_ns: int, start: int) -> tuple[NumberDataPoint, ...]:
    """`major` from majorPageFaults and `minor` from `field` (the kernel's pgfault, which counts
    every fault) less the major ones; a count missing, or fewer faults than major ones, gives
    no minor point."""
    major, every = _number(block.get("majorPageFaults")), _number(block.get(field))
    points = []
    if major is not None:
        points.append(_point(_MAJOR, time_ns, major, start))
        if every is not None and every >= major:
            points.append(_point(_MINOR, time_ns, every - major, start))
    return tuple(points)


def _point(attrs: Attributes, time_ns: int, value: int | float, start: int) -> NumberDataPoint:
    return NumberDataPoint(
        attributes=attrs, time_unix_nano=time_ns, value=value, start_time_unix_nano=start
    )


def _object(value: object) -> Json:
    return value if isinstance(value, Mapping) else {}


def _objects(value: object) -> Iterable[Json]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _number(value: object) -> int | float | None:
    # Integers stay integers (bytes and counters beyond 2**53 keep every digit).
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None
