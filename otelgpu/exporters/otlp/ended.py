"""Series that end are closed downstream: one point flagged "no recorded value" each.

A pushed series has no scrape to miss: a backend fed by OTLP (Prometheus' OTLP endpoint, Mimir,
a Collector's prometheus or prometheusremotewrite exporter) keeps serving its last value until
its own lookback ends, five minutes in Prometheus. A holder that left a shared GPU would go on
being billed for its share that long, and a GPU that recovered would still read degraded.
OTLP's answer is the data point flag `FLAG_NO_RECORDED_VALUE`: each of those backends turns
such a point into a staleness marker (or drops the series), so the series ends at once.

`EndedSeries` remembers, per identity (`ResourceMetrics.identity`) and metric, the series it
sent last. When the identity reports a metric again, each series of that metric whose point
attributes it no longer reports gets one flagged point (value NaN), under the resource and
metric it was sent with, at the time of the metric's new points and never earlier than a
millisecond after the metric's last ones. As in the Prometheus exporter's sets, a metric the
identity does not report in a batch is left alone (another pipeline sending to the same
exporter may report it); an identity that reports no metrics at all in a batch (its "gone"
marker) closes everything it sent but what the same batch sends.

Point attributes decide, not resource attributes: a backend that keeps only point attributes
as labels (Prometheus' OTLP endpoint by default) sees a GPU whose pod changed as one continuing
series, and closing it there would mark the live series stale. What point attributes tell apart
is what ends: a holder's allocation series, a process, a GPU health state, a lost GPU's
readings. Attribute values are compared as a backend's labels compare them (as text), so a value
that only changed type never closes its live series.

Only identities are tracked (a resource without one is never closed), a new exporter (after a
reload) starts with no memory, an identity not reported for `FORGET_AFTER` is forgotten (a
backend's lookback has ended its series by then), and at most `LIMIT` identities are
remembered (the first remembered are forgotten first).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from itertools import repeat
from typing import Any, NamedTuple

from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics

LIMIT = 16384  # identities remembered (a node has tens to thousands)
FORGET_AFTER = 300_000_000_000  # ns: an identity unreported this long is forgotten (5 minutes)
_SWEEP = 60_000_000_000  # ns between two looks for identities to forget
_MS = 1_000_000  # a closing point comes at least a millisecond after the metric's last points


class _Head(NamedTuple):
    """The resource a point was sent under: what its closing point is sent under."""

    resource: Any
    scope: str
    scope_version: str
    schema_url: str

    @classmethod
    def of(cls, rm: ResourceMetrics) -> _Head:
        return cls(rm.resource, rm.scope, rm.scope_version, rm.schema_url)

    def matches(self, rm: ResourceMetrics) -> bool:
        return (
            self.resource == rm.resource
            and self.scope == rm.scope
            and self.scope_version == rm.scope_version
            and self.schema_url == rm.schema_url
        )


class _Descriptor(NamedTuple):
    """A metric as sent, without its points: one per metric name, shared by every cycle."""

    name: str
    unit: str
    description: str
    kind: MetricKind
    monotonic: bool

    @classmethod
    def of(cls, metric: Metric) -> _Descriptor:
        return cls(metric.name, metric.unit, metric.description, metric.kind, metric.monotonic)

    def describes(self, metric: Metric) -> bool:
        """Whether `metric` (of this name) is sent as described."""
        return (
            self.unit == metric.unit
            and self.description == metric.description
            and self.kind is metric.kind
            and self.monotonic == metric.monotonic
        )


class _Sent:
    """One metric of one identity as last sent: each point's attributes, the resource each
    was sent under (one for all, the usual case, or one per point when the metric spans
    several resources of the identity), and the time of its points (the latest)."""

    __slots__ = ("descriptor", "heads", "points", "time")

    def __init__(
        self, descriptor: _Descriptor, points: list[Mapping[str, Any]], head: _Head, time: int
    ) -> None:
        self.descriptor = descriptor
        self.points = points
        self.heads: _Head | list[_Head] = head
        self.time = time

    def extend(self, points: list[Mapping[str, Any]], head: _Head, time: int) -> None:
        """More points of the metric, from another resource of the identity."""
        if isinstance(self.heads, _Head):
            self.heads = [self.heads] * len(self.points)
        self.points = self.points + points
        self.heads += [head] * len(points)
        self.time = max(self.time, time)

    def sent(self) -> Iterable[tuple[Mapping[str, Any], _Head]]:
        """(attributes, resource) of each point."""
        heads = self.heads
        if isinstance(heads, _Head):
            return zip(self.points, repeat(heads, len(self.points)), strict=True)
        return zip(self.points, heads, strict=True)


class _Identity:
    __slots__ = ("metrics", "seen")

    def __init__(self, metrics: dict[str, _Sent], seen: int) -> None:
        self.metrics = metrics
        self.seen = seen  # wall time of its last report


class EndedSeries:
    """What each identity sent last, per metric, and the closing points of what it stopped
    sending."""

    def __init__(self, wall: Callable[[], int] = time.time_ns, limit: int = LIMIT) -> None:
        self._wall = wall
        self._limit = limit
        self._sent: dict[Hashable, _Identity] = {}
        self._descriptors: dict[str, _Descriptor] = {}
        self._swept = wall()

    def __len__(self) -> int:
        return len(self._sent)

    def closing(self, batch: Batch) -> Batch:
        """The resources holding one flagged point per series that an identity reported in
        `batch` sent last time and not now; remembers what `batch` sends.

        Each metric's point attribute mappings (shared by receivers and processors from one
        cycle to the next) are compared with the last ones; only when they differ are the
        series told apart one by one. An identity that sent the same series as last time is
        updated in place: a steady cycle stores no new objects (nothing for the cyclic
        garbage collector to scan)."""
        grouped: dict[Hashable, list[ResourceMetrics]] = {}
        for rm in batch:
            if rm.identity is None:
                continue
            try:
                found = grouped.get(rm.identity)
            except TypeError:  # an unhashable identity: not tracked
                continue
            if found is None:
                grouped[rm.identity] = [rm]
            else:
                found.append(rm)
        wall = self._wall()
        closed = _Closed()
        sent = self._sent
        for identity, rms in grouped.items():
            before = sent.get(identity)
            if before is not None and len(rms) == 1 and _renewed(before, rms[0]):
                before.seen = wall
                continue
            now = self._metrics(rms, wall)
            if before is not None:
                gone = any(not rm.metrics for rm in rms)
                for name, old in before.metrics.items():
                    new = now.get(name)
                    if new is None:
                        if gone:
                            closed.all(old, wall)
                        else:
                            now[name] = old  # not reported this time: left alone
                    elif new.points != old.points:
                        closed.missing(old, new)
            if now:
                if before is None:
                    sent[identity] = _Identity(now, wall)
                else:
                    before.metrics, before.seen = now, wall
            elif before is not None:
                del sent[identity]
        self._forget(wall)
        return closed.resources()

    def _metrics(self, rms: list[ResourceMetrics], wall: int) -> dict[str, _Sent]:
        """What `rms` send, by metric (a metric without points: at its resource's time)."""
        out: dict[str, _Sent] = {}
        for rm in rms:
            if not rm.metrics:
                continue
            head = _Head.of(rm)
            first = _first_time(rm)
            if first is None:
                first = wall
            for metric in rm.metrics:
                points = metric.points
                at = points[0].time_unix_nano if points else first
                attributes = [p.attributes for p in points]
                entry = out.get(metric.name)
                if entry is None:
                    out[metric.name] = _Sent(self._descriptor(metric), attributes, head, at)
                else:
                    entry.extend(attributes, head, at)
        return out

    def _descriptor(self, metric: Metric) -> _Descriptor:
        found = self._descriptors.get(metric.name)
        if found is None or not found.describes(metric):
            found = _Descriptor.of(metric)
            if len(self._descriptors) >= self._limit:
                self._descriptors.clear()
            self._descriptors[metric.name] = found
        return found

    def _forget(self, wall: int) -> None:
        """Forgets identities past `LIMIT` (first remembered first) and, once a minute, those
        unreported for `FORGET_AFTER`."""
        sent = self._sent
        while len(sent) > self._limit:
            del sent[next(iter(sent))]
        if wall - self._swept < _SWEEP:
            return
        self._swept = wall
        for identity in [i for i, e in sent.items() if wall - e.seen > FORGET_AFTER]:
            del sent[identity]


def _first_time(rm: ResourceMetrics) -> int | None:
    """The time of `rm`'s first point (what a metric without points of its own is at)."""
    return next((m.points[0].time_unix_nano for m in rm.metrics if m.points), None)


def _renewed(entry: _Identity, rm: ResourceMetrics) -> bool:
    """Whether `rm` sends exactly the series `entry` holds, each metric from this one resource;
    if so, `entry` takes its times and resource (a new head only if the resource changed)."""
    metrics = entry.metrics
    if not rm.metrics or len(metrics) != len(rm.metrics):
        return False
    for metric in rm.metrics:
        old = metrics.get(metric.name)
        if old is None or not isinstance(old.heads, _Head):
            return False
        points, known = metric.points, old.points
        if len(points) != len(known):
            return False
        for attributes, point in zip(known, points, strict=True):
            if attributes is not point.attributes and attributes != point.attributes:
                return False
        if not old.descriptor.describes(metric):
            return False
    head = None
    first = _first_time(rm)
    for metric in rm.metrics:
        old = metrics[metric.name]
        at = metric.points[0].time_unix_nano if metric.points else first
        if at is not None:
            old.time = at
        if head is None:
            head = old.heads
            assert isinstance(head, _Head)
            if not head.matches(rm):
                head = _Head.of(rm)
        old.heads = head
    return True


class _Closed:
    """The closing points of one batch, by the resource they are sent under. Each point is a
    metric of its own: the Collector's prometheus exporter reads only a metric's first
    flagged point."""

    def __init__(self) -> None:
        # id of a head (one per resource sent, shared by its points) → (the head, its metrics)
        self._by_head: dict[int, tuple[_Head, list[Metric]]] = {}

    def missing(self, old: _Sent, new: _Sent) -> None:
        """Closes the points of `old` that `new` lacks."""
        kept = {_key(attributes) for attributes in new.points}
        when = max(new.time, old.time + _MS)
        for attributes, head in old.sent():
            if _key(attributes) not in kept:
                self._add(old.descriptor, attributes, head, when)

    def all(self, old: _Sent, wall: int) -> None:
        when = max(wall, old.time + _MS)
        for attributes, head in old.sent():
            self._add(old.descriptor, attributes, head, when)

    def _add(self, d: _Descriptor, attributes: Mapping[str, Any], head: _Head, when: int) -> None:
        point = NumberDataPoint(attributes=attributes, time_unix_nano=when, value=math.nan)
        metric = Metric(
            name=d.name,
            unit=d.unit,
            description=d.description,
            kind=d.kind,
            monotonic=d.monotonic,
            points=(point,),
        )
        found = self._by_head.get(id(head))
        if found is None:
            self._by_head[id(head)] = (head, [metric])
        else:
            found[1].append(metric)

    def resources(self) -> Batch:
        return tuple(
            ResourceMetrics(
                resource=head.resource,
                metrics=tuple(metrics),
                scope=head.scope,
                scope_version=head.scope_version,
                schema_url=head.schema_url,
            )
            for head, metrics in self._by_head.values()
        )


def _key(attributes: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """A point's attributes as a backend's labels: each value as text."""
    return frozenset((key, _text(value)) for key, value in attributes.items())


def _text(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if value.is_integer():
            return str(int(value))
    return str(value)
