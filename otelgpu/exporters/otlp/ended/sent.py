"""What the memory keeps of each identity: the metrics it sent last (`Sent`, per metric: its
descriptor, each point's attributes, the resource each was sent under, the time of its points),
and the identity's own record (`Remembered`: its metrics, its latest resource, when it was
seen). `renewed` is the per-identity steady check: a resource that sends exactly what its
identity holds updates it in place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple

from otelgpu.pdata.model import Metric, MetricKind, ResourceMetrics

ATTRIBUTES = attrgetter("attributes")  # a point's attribute mapping


class Head(NamedTuple):
    """The resource a point was sent under: what its closing point is sent under."""

    resource: Any
    scope: str
    scope_version: str
    schema_url: str

    @classmethod
    def of(cls, rm: ResourceMetrics) -> Head:
        return cls(rm.resource, rm.scope, rm.scope_version, rm.schema_url)


class Descriptor(NamedTuple):
    """A metric as sent, without its points: one per metric name, shared by every cycle."""

    name: str
    unit: str
    description: str
    kind: MetricKind
    monotonic: bool

    @classmethod
    def of(cls, metric: Metric) -> Descriptor:
        return cls(metric.name, metric.unit, metric.description, metric.kind, metric.monotonic)

    def describes(self, metric: Metric) -> bool:
        """Whether `metric` (of this name) is sent as described."""
        return (
            self.unit == metric.unit
            and self.description == metric.description
            and self.kind is metric.kind
            and self.monotonic == metric.monotonic
        )


class Sent:
    """One metric of one identity as last sent: each point's attributes, the resource each
    was sent under (one for all; one per point when the metric spans several resources of the
    identity; None, the steady case: its identity's latest resource, `Remembered.head`), and
    the time of its points (the latest)."""

    __slots__ = ("descriptor", "heads", "points", "time")

    def __init__(
        self, descriptor: Descriptor, points: list[Mapping[str, Any]], head: Head, time: int
    ) -> None:
        self.descriptor = descriptor
        self.points = points
        self.heads: Head | list[Head] | None = head
        self.time = time

    def extend(self, points: list[Mapping[str, Any]], head: Head, time: int) -> None:
        """More points of the metric, from another resource of the identity (built by
        `EndedSeries._metrics`: its heads are never None)."""
        heads = self.heads
        if not isinstance(heads, list):
            assert heads is not None
            heads = [heads] * len(self.points)
        self.points = self.points + points
        self.heads = heads + [head] * len(points)
        self.time = max(self.time, time)

    def sent(self, identity: Remembered) -> Iterable[tuple[Mapping[str, Any], Head]]:
        """(attributes, resource) of each point."""
        heads = self.heads
        if isinstance(heads, list):
            return zip(self.points, heads, strict=True)
        head = identity.head() if heads is None else heads
        return zip(self.points, repeat(head, len(self.points)), strict=True)


class Remembered:
    """What one identity sent: its metrics, and the resource it last reported from alone
    (what a metric whose `heads` is None was sent under), kept as the batch gave it: a steady
    cycle stores four references, never compares or builds a resource."""

    __slots__ = (
        "_head",
        "gap",
        "metrics",
        "order",
        "resource",
        "schema_url",
        "scope",
        "scope_version",
        "seen",
    )

    def __init__(self, metrics: dict[str, Sent], seen: int, rm: ResourceMetrics) -> None:
        self.metrics = metrics
        self.seen = seen  # wall time of its last report
        self.gap = 0  # the longest wall time between two of its reports (0: reported once)
        # Its metrics in the order its one resource last reported them, when that resource
        # sent them all (the steady case, which `renewed` checks in that order); else None.
        self.order: tuple[Sent, ...] | None = None
        self.took(rm)
        self._head: Head | None = None

    def renew(self, metrics: dict[str, Sent], rms: list[ResourceMetrics]) -> None:
        """`metrics` are what it sent now (from `rms`, plus what they left alone)."""
        self.metrics = metrics
        self.order = None
        if len(rms) != 1:
            return
        rm = rms[0]
        if not rm.metrics or len(rm.metrics) != len(metrics):
            return
        order = tuple(metrics[metric.name] for metric in rm.metrics)
        if len(set(map(id, order))) != len(order) or any(isinstance(m.heads, list) for m in order):
            return  # a name twice, or a metric spanning resources: told apart the slow way
        for metric in order:
            metric.heads = None  # the identity's resource, `took` below
        self.took(rm)
        self.order = order

    def took(self, rm: ResourceMetrics) -> None:
        """`rm` is now the resource its metrics were last sent under."""
        self.resource = rm.resource
        self.scope = rm.scope
        self.scope_version = rm.scope_version
        self.schema_url = rm.schema_url

    def head(self) -> Head:
        """The resource it last reported from, as a head (built once per resource)."""
        head = self._head
        if (
            head is None
            or head.resource is not self.resource
            or head.scope is not self.scope
            or head.scope_version is not self.scope_version
            or head.schema_url is not self.schema_url
        ):
            head = self._head = Head(self.resource, self.scope, self.scope_version, self.schema_url)
        return head

    def reported(self, wall: int) -> None:
        gap = wall - self.seen
        if gap > self.gap:
            self.gap = gap
        self.seen = wall


def first_time(rm: ResourceMetrics) -> int | None:
    """The time of `rm`'s first point (what a metric without points of its own is at)."""
    return next((m.points[0].time_unix_nano for m in rm.metrics if m.points), None)


def renewed(entry: Remembered, rm: ResourceMetrics) -> bool:
    """Whether `rm` sends exactly the series `entry` holds, in the order it sent them last,
    from this one resource; if so, `entry` takes its times and resource (references only:
    nothing is compared but the descriptors and each point's attribute mapping, by identity
    first, and nothing is kept that was not)."""
    order = entry.order
    reported = rm.metrics
    if order is None or len(order) != len(reported):
        return False
    for metric, old in zip(reported, order, strict=True):
        d = old.descriptor  # (`Descriptor.describes`, inlined: every metric of every cycle)
        if (
            d.name != metric.name
            or d.unit != metric.unit
            or d.description != metric.description
            or d.kind is not metric.kind
            or d.monotonic != metric.monotonic
        ):
            return False
        # One comparison in C: each mapping by identity first (receivers and processors
        # share them from one cycle to the next), by value only when it is another object.
        if old.points != list(map(ATTRIBUTES, metric.points)):
            return False
    first: int | None = None
    for metric, old in zip(reported, order, strict=True):
        points = metric.points
        if points:
            old.time = points[-1].time_unix_nano
        else:
            if first is None:
                first = first_time(rm)
            if first is not None:
                old.time = first
    entry.resource = rm.resource  # (`Remembered.took`, inlined)
    entry.scope = rm.scope
    entry.scope_version = rm.scope_version
    entry.schema_url = rm.schema_url
    return True
