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

A closing point is owed until a request carrying it is accepted (`closes` hands out a
`Receipt` with the request; `accepted` or `refused` settles it): a request the sending queue
refused or the retries gave up leaves its closing points to the next request, at that
request's time, unless the series came back meanwhile (closing it then would end a live
series). An owed point is dropped after `FORGET_AFTER` (the backend's lookback has ended the
series by then) and at most `LIMIT` are owed (the oldest dropped first).

A reload hands the memory to the new exporter (`inherit`): what the old service sent is closed
as it ends, as if nothing had stopped, and what the new configuration no longer sends at all
(an identity, or a metric of one, never reported again) is closed once it is overdue: not
reported within twice its identity's longest gap between two reports (`_UNKNOWN_GAP` when it
was reported once) after the new exporter's first batch.

A steady cycle (nothing ended) is what this costs most often: when a batch has the same
identities as the last two, the resources that each renewed their identity alone are compared
with what they sent last and taken together in C (`_Shape`); only the others (a shared GPU's
allocation series, anything that changed) are told apart identity by identity.

Only identities are tracked (a resource without one is never closed), an identity not reported
for `FORGET_AFTER` is forgotten (a backend's lookback has ended its series by then), and at
most `LIMIT` identities are remembered (the first remembered are forgotten first).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics

LIMIT = 16384  # identities remembered (a node has tens to thousands)
FORGET_AFTER = 300_000_000_000  # ns: an identity unreported this long is forgotten (5 minutes)
_SWEEP = 60_000_000_000  # ns between two looks for identities to forget
_ATTRIBUTES = attrgetter("attributes")  # a point's attribute mapping
_SHAPES = 4  # whole batches remembered (one per pipeline sending to the exporter, usually)
_MS = 1_000_000  # a closing point comes at least a millisecond after the metric's last points
# After a reload, the gap assumed for an identity reported only once before it: the receivers'
# default collection interval is 10s, so twice this waits for three of their cycles.
_UNKNOWN_GAP = 15_000_000_000


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
    was sent under (one for all; one per point when the metric spans several resources of the
    identity; None, the steady case: its identity's latest resource, `_Identity.head`), and
    the time of its points (the latest)."""

    __slots__ = ("descriptor", "heads", "points", "time")

    def __init__(
        self, descriptor: _Descriptor, points: list[Mapping[str, Any]], head: _Head, time: int
    ) -> None:
        self.descriptor = descriptor
        self.points = points
        self.heads: _Head | list[_Head] | None = head
        self.time = time

    def extend(self, points: list[Mapping[str, Any]], head: _Head, time: int) -> None:
        """More points of the metric, from another resource of the identity (built by
        `_metrics`: its heads are never None)."""
        heads = self.heads
        if not isinstance(heads, list):
            assert heads is not None
            heads = [heads] * len(self.points)
        self.points = self.points + points
        self.heads = heads + [head] * len(points)
        self.time = max(self.time, time)

    def sent(self, identity: _Identity) -> Iterable[tuple[Mapping[str, Any], _Head]]:
        """(attributes, resource) of each point."""
        heads = self.heads
        if isinstance(heads, list):
            return zip(self.points, heads, strict=True)
        head = identity.head() if heads is None else heads
        return zip(self.points, repeat(head, len(self.points)), strict=True)


class _Identity:
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

    def __init__(self, metrics: dict[str, _Sent], seen: int, rm: ResourceMetrics) -> None:
        self.metrics = metrics
        self.seen = seen  # wall time of its last report
        self.gap = 0  # the longest wall time between two of its reports (0: reported once)
        # Its metrics in the order its one resource last reported them, when that resource
        # sent them all (the steady case, which `_renewed` checks in that order); else None.
        self.order: tuple[_Sent, ...] | None = None
        self.took(rm)
        self._head: _Head | None = None

    def renew(self, metrics: dict[str, _Sent], rms: list[ResourceMetrics]) -> None:
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

    def head(self) -> _Head:
        """The resource it last reported from, as a head (built once per resource)."""
        head = self._head
        if (
            head is None
            or head.resource is not self.resource
            or head.scope is not self.scope
            or head.scope_version is not self.scope_version
            or head.schema_url is not self.schema_url
        ):
            head = self._head = _Head(
                self.resource, self.scope, self.scope_version, self.schema_url
            )
        return head

    def reported(self, wall: int) -> None:
        gap = wall - self.seen
        if gap > self.gap:
            self.gap = gap
        self.seen = wall


_OwedKey = tuple[Hashable, str, frozenset[tuple[str, str]]]  # identity, metric, attributes


class _Owed:
    """A closing point no accepted request has carried yet."""

    __slots__ = ("attributes", "descriptor", "due", "head", "key", "since", "when")

    def __init__(
        self,
        key: _OwedKey,
        descriptor: _Descriptor,
        attributes: Mapping[str, Any],
        head: _Head,
        when: int,
        since: int,
    ) -> None:
        self.key = key
        self.descriptor = descriptor
        self.attributes = attributes
        self.head = head
        self.when = when  # the time it was last sent at
        self.since = since  # wall time it was first sent
        self.due = False  # the request carrying it failed: the next request carries it


Receipt = tuple[_Owed, ...]  # the closing points one request carries, to settle


class EndedSeries:
    """What each identity sent last, per metric, and the closing points of what it stopped
    sending, owed until a request carrying them is accepted."""

    def __init__(self, wall: Callable[[], int] = time.time_ns, limit: int = LIMIT) -> None:
        self._wall = wall
        self._limit = limit
        self._sent: dict[Hashable, _Identity] = {}
        self._descriptors: dict[str, _Descriptor] = {}
        self._swept = wall()
        self._owed: dict[_OwedKey, _Owed] = {}
        self._owing: dict[Hashable, int] = {}  # identity → how many of its points are owed
        self._due: list[_Owed] = []  # owed points whose request failed
        # After a reload: identity → the metrics it sent before and has not reported since
        self._inherited: dict[Hashable, set[str]] = {}
        self._inherited_from: int | None = None  # wall time of the first batch after it
        # Whole batches that sent exactly what is remembered, by their identities (`_Shape`)
        self._shapes: dict[tuple[Hashable, ...], _Shape] = {}
        # The shape whose last steady batch its entries do not hold yet (`_catch_up`)
        self._pending: _Shape | None = None
        self._last_key: tuple[Hashable, ...] | None = None  # the last batch's identities

    def __len__(self) -> int:
        return len(self._sent)

    @property
    def owed(self) -> int:
        """Closing points not carried by an accepted request yet."""
        return len(self._owed)

    def closing(self, batch: Batch) -> Batch:
        """The closing resources of `batch` (see `closes`), left unsettled."""
        return self.closes(batch)[0]

    def closes(self, batch: Batch) -> tuple[Batch, Receipt]:
        """The resources holding one flagged point per series that an identity reported in
        `batch` sent last time and not now, with the points still owed from requests that
        failed; remembers what `batch` sends. The receipt settles them (`accepted`,
        `refused`).

        Each metric's point attribute mappings (shared by receivers and processors from one
        cycle to the next) are compared with the last ones; only when they differ are the
        series told apart one by one. An identity that sent the same series as last time is
        updated in place: a steady cycle stores no new objects (nothing for the cyclic
        garbage collector to scan). When a batch has the same identities as the last two, the
        resources that each renewed an identity alone last time (`_Shape`) are checked and
        taken together, in C, not identity by identity; the others go the usual way."""
        wall = self._wall()
        shapes = self._shapes
        rest = batch
        key: tuple[Hashable, ...] | None = None
        if not self._due and not self._inherited:
            try:
                key = tuple(map(_IDENTITY, batch))
                hash(key)
            except TypeError:  # an unhashable identity: not tracked, no shape
                key = None
            shape = shapes.get(key) if shapes and key is not None else None
            if shape is not None and shape.took(batch, wall):
                if self._pending is not shape:
                    self._catch_up()
                    self._pending = shape
                rest, key = shape.rest_of(batch), None
                if not rest:
                    self._forget(wall)
                    return (), ()
            else:
                self._catch_up()
        else:
            self._catch_up()
        # identity → its one resource (the usual case: no list built) or its resources
        grouped: dict[Hashable, ResourceMetrics | list[ResourceMetrics]] = {}
        for rm in rest:
            if rm.identity is None:
                continue
            try:
                found = grouped.get(rm.identity)
            except TypeError:  # an unhashable identity: not tracked
                continue
            if found is None:
                grouped[rm.identity] = rm
            elif isinstance(found, list):
                found.append(rm)
            else:
                grouped[rm.identity] = [found, rm]
        closed = _Closed(wall)
        sent = self._sent
        inherited = self._inherited
        for identity, found in grouped.items():
            before = sent.get(identity)
            if isinstance(found, list):
                rms = found
            elif before is not None and _renewed(before, found):
                gap = wall - before.seen  # (`_Identity.reported`, inlined: every identity)
                if gap > before.gap:
                    before.gap = gap
                before.seen = wall
                if inherited:
                    inherited.pop(identity, None)
                continue
            else:
                rms = [found]
            if shapes and before is not None and before.order is not None:
                self._drop_shapes()  # a shape may list it: what it holds changes now
            now = self._metrics(rms, wall)
            if inherited and identity in inherited:
                self._renewed_after_reload(identity, rms)
            if identity in self._owing:
                self._came_back(identity, now)
            if before is not None:
                gone = any(not rm.metrics for rm in rms)
                for name, old in before.metrics.items():
                    new = now.get(name)
                    if new is None:
                        if gone:
                            closed.all(identity, before, old, wall)
                        else:
                            now[name] = old  # not reported this time: left alone
                    elif new.points != old.points:
                        closed.missing(identity, before, old, new)
            if now:
                if before is None:
                    sent[identity] = before = _Identity(now, wall, rms[0])
                else:
                    before.reported(wall)
                before.renew(now, rms)
            elif before is not None:
                del sent[identity]
        if key is not None:
            if key == self._last_key and key not in shapes and not self._due:
                self._remember_shape(batch, key)
            self._last_key = key
        if inherited:
            self._close_overdue(closed, wall)
        if self._due:
            due, self._due = self._due, []
            for owed in due:
                owed.due = False
                if self._owed.get(owed.key) is owed:
                    closed.again(owed)
        self._forget(wall)
        return closed.resources(), self._owe(closed.owed)

    def accepted(self, receipt: Receipt | None) -> None:
        """A request carrying `receipt`'s points was accepted: they are owed no more."""
        owed = self._owed
        for point in receipt or ():
            if owed.get(point.key) is point:
                self._settle(point)

    def refused(self, receipt: Receipt | None) -> None:
        """The request carrying `receipt`'s points will not be sent: the next one carries
        those still owed."""
        owed = self._owed
        for point in receipt or ():
            if not point.due and owed.get(point.key) is point:
                point.due = True
                self._due.append(point)

    def inherit(self) -> None:
        """This memory now serves a new exporter (a reload): every series remembered is
        closed if the new configuration does not send it again in time."""
        self._drop_shapes()
        self._inherited = {i: set(entry.metrics) for i, entry in self._sent.items()}
        self._inherited_from = None
        # Whatever the old exporter's requests still carried is over: all owed go again.
        self._due = list(self._owed.values())
        for point in self._due:
            point.due = True

    def _owe(self, points: list[_Owed]) -> Receipt:
        owed, owing = self._owed, self._owing
        for point in points:
            replaced = owed.pop(point.key, None)
            if replaced is None:
                identity = point.key[0]
                owing[identity] = owing.get(identity, 0) + 1
            owed[point.key] = point
        while len(owed) > self._limit:
            self._settle(next(iter(owed.values())))
        return tuple(points)

    def _settle(self, point: _Owed) -> None:
        del self._owed[point.key]
        identity = point.key[0]
        left = self._owing[identity] - 1
        if left:
            self._owing[identity] = left
        else:
            del self._owing[identity]

    def _came_back(self, identity: Hashable, now: dict[str, _Sent]) -> None:
        """Owed points of series `identity` sends again are owed no more."""
        owed = self._owed
        for name, entry in now.items():
            for attributes in entry.points:
                point = owed.get((identity, name, _key(attributes)))
                if point is not None:
                    self._settle(point)

    def _renewed_after_reload(self, identity: Hashable, rms: list[ResourceMetrics]) -> None:
        names = self._inherited[identity]
        if any(not rm.metrics for rm in rms):  # gone: its series close now
            del self._inherited[identity]
            return
        for rm in rms:
            for metric in rm.metrics:
                names.discard(metric.name)
        if not names:
            del self._inherited[identity]

    def _close_overdue(self, closed: _Closed, wall: int) -> None:
        """Closes what a reload's new configuration did not send again in time."""
        if self._inherited_from is None:
            self._inherited_from = wall
        since = self._inherited_from
        sent = self._sent
        for identity, names in list(self._inherited.items()):
            entry = sent.get(identity)
            if entry is None:
                del self._inherited[identity]
                continue
            if wall - since < 2 * min(entry.gap or _UNKNOWN_GAP, FORGET_AFTER):
                continue
            del self._inherited[identity]
            entry.order = None
            for name in names:
                old = entry.metrics.pop(name, None)
                if old is not None:
                    closed.all(identity, entry, old, wall)
            if not entry.metrics:
                del sent[identity]

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

    def _remember_shape(self, batch: Batch, key: tuple[Hashable, ...]) -> None:
        """Remembers which resources of `batch` (whose identities are `key`) sent alone what
        their identity holds now, in the order it holds it, each metric with points."""
        once: dict[Hashable, int] = {}
        for identity in key:
            once[identity] = once.get(identity, 0) + 1
        entries = list(map(self._sent.get, key))
        shaped = [
            index
            for index, (identity, entry, rm) in enumerate(zip(key, entries, batch, strict=True))
            if once[identity] == 1
            and entry is not None
            and entry.order is not None
            and len(entry.order) == len(rm.metrics)
            and all(metric.points for metric in rm.metrics)
        ]
        if not shaped:
            return
        if len(self._shapes) >= _SHAPES:
            self._drop_shapes()
        picked = [entries[index] for index in shaped]
        assert all(entry is not None for entry in picked)
        self._shapes[key] = _Shape(len(batch), shaped, batch, picked)  # type: ignore[arg-type]

    def _catch_up(self) -> None:
        """Has the entries of the pending shape take what its last steady batch sent."""
        if self._pending is not None:
            self._pending.settle()
            self._pending = None

    def _drop_shapes(self) -> None:
        """Forgets every shape (what one lists is about to change), settled first."""
        self._catch_up()
        self._shapes.clear()

    def _forget(self, wall: int) -> None:
        """Forgets identities past `LIMIT` (first remembered first) and, once a minute, those
        unreported for `FORGET_AFTER` and points owed that long."""
        sent = self._sent
        if len(sent) > self._limit:
            self._drop_shapes()
            while len(sent) > self._limit:
                del sent[next(iter(sent))]
        if wall - self._swept < _SWEEP:
            return
        self._swept = wall
        self._catch_up()  # the times each identity was seen, as of now
        forgotten = [i for i, e in sent.items() if wall - e.seen > FORGET_AFTER]
        if forgotten:
            self._drop_shapes()
        for identity in forgotten:
            del sent[identity]
        for point in [p for p in self._owed.values() if wall - p.since > FORGET_AFTER]:
            self._settle(point)


_IDENTITY = attrgetter("identity")
_METRICS = attrgetter("metrics")
_POINTS = attrgetter("points")
# A metric's descriptor, field by field: compared as lists of references, no tuple built
_DESCRIPTOR_FIELDS = tuple(map(attrgetter, _Descriptor._fields))
_FIRST_TIME = attrgetter("time_unix_nano")
_FIRST = itemgetter(0)
_HEAD_FIELDS = ("resource", "scope", "scope_version", "schema_url")
_HEAD_GETTERS = tuple(map(attrgetter, _HEAD_FIELDS))


def _consume(iterator: Iterator[object]) -> None:
    """Runs `iterator` to its end in C (a map of `setattr` over many objects)."""
    deque(iterator, maxlen=0)


class _Shape:
    """Which resources of a batch each renewed their identity alone (`shaped`: their
    positions), as flat lists of what a steady cycle shares with the last one: each
    resource's metric count, each metric's descriptor and point count, each point's attribute
    mapping. The same resources of the next batch with the same identities are compared with
    them in C, element by element (by identity first): no Python code runs per identity or
    point. The other resources (an identity sent from several, a metric without points) go
    the usual way.

    A steady batch changes no set, only what the closing points would be sent with: each
    metric's time, each identity's resource, when each identity was seen. Those are kept as
    flat lists here (`took`), not written into the entries, and the report times as three
    numbers; the entries take them (`settle`) only when the memory next looks at them: a
    batch that is not steady, a sweep, a reload. A steady cycle writes no entry.

    Valid while the memory's entries are the ones it lists: `EndedSeries` drops every shape
    (settled first) whenever an identity with an order (one a shape may list) is told apart
    the slow way, forgotten, or inherited."""

    __slots__ = (
        "attributes",
        "counts",
        "descriptors",
        "entries",
        "heads",
        "pick",
        "point_counts",
        "rest",
        "sents",
        "times",
        "walls",
    )

    def __init__(
        self, size: int, shaped: list[int], batch: Batch, entries: list[_Identity]
    ) -> None:
        self.pick = _picker(shaped)
        self.rest = _picker(sorted(set(range(size)) - set(shaped)))
        self.entries = entries
        self.sents = list(chain.from_iterable(entry.order or () for entry in entries))
        descriptors = [sent.descriptor for sent in self.sents]
        self.descriptors = [list(map(getter, descriptors)) for getter in _DESCRIPTOR_FIELDS]
        picked = self.pick(batch)
        self.counts = list(map(len, map(_METRICS, picked)))
        metrics = list(chain.from_iterable(map(_METRICS, picked)))
        self.point_counts = list(map(len, map(_POINTS, metrics)))
        self.attributes = list(map(_ATTRIBUTES, chain.from_iterable(map(_POINTS, metrics))))
        # Not settled yet (None: nothing pending): each sent metric's time, each entry's
        # resource fields (`_HEAD_FIELDS`, a list each), and the wall times of the first and
        # last steady batch with the longest time between two of them.
        self.times: list[int] | None = None
        self.heads: list[list[Any]] = []
        self.walls = (0, 0, 0)

    def rest_of(self, batch: Batch) -> Batch:
        """The resources of `batch` that go the usual way."""
        return self.rest(batch)

    def took(self, batch: Batch, wall: int) -> bool:
        """Whether `batch`'s shaped resources send exactly what this shape holds; if so, what
        their identities would take from them is kept until `settle`."""
        picked = self.pick(batch)
        if list(map(len, map(_METRICS, picked))) != self.counts:
            return False
        metrics = list(chain.from_iterable(map(_METRICS, picked)))
        for getter, known in zip(_DESCRIPTOR_FIELDS, self.descriptors, strict=True):
            if list(map(getter, metrics)) != known:
                return False
        points = list(map(_POINTS, metrics))
        if list(map(len, points)) != self.point_counts:
            return False
        if list(map(_ATTRIBUTES, chain.from_iterable(points))) != self.attributes:
            return False
        self.heads = [list(map(getter, picked)) for getter in _HEAD_GETTERS]
        if self.times is None:
            self.walls = (wall, wall, 0)
        else:
            first, last, step = self.walls
            self.walls = (first, wall, max(step, wall - last))
        self.times = list(map(_FIRST_TIME, map(_FIRST, points)))
        return True

    def settle(self) -> None:
        """The entries take what the steady batches since the last settle sent (what
        `_renewed` and `_Identity.reported` do for each)."""
        times = self.times
        if times is None:
            return
        entries = self.entries
        _consume(map(setattr, self.sents, repeat("time"), times))
        for field, values in zip(_HEAD_FIELDS, self.heads, strict=True):
            _consume(map(setattr, entries, repeat(field), values))
        first, last, step = self.walls
        for entry in entries:
            entry.gap = max(entry.gap, first - entry.seen, step)
            entry.seen = last
        self.times, self.heads = None, []


def _picker(indices: list[int]) -> Callable[[Batch], Batch]:
    """A function giving the resources of a batch at `indices`, as a tuple (in C)."""
    if not indices:
        return lambda _batch: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda batch: (batch[only],)
    return itemgetter(*indices)


def _first_time(rm: ResourceMetrics) -> int | None:
    """The time of `rm`'s first point (what a metric without points of its own is at)."""
    return next((m.points[0].time_unix_nano for m in rm.metrics if m.points), None)


def _renewed(entry: _Identity, rm: ResourceMetrics) -> bool:
    """Whether `rm` sends exactly the series `entry` holds, in the order it sent them last,
    from this one resource; if so, `entry` takes its times and resource (references only:
    nothing is compared but the descriptors and each point's attribute mapping, by identity
    first, and nothing is kept that was not)."""
    order = entry.order
    reported = rm.metrics
    if order is None or len(order) != len(reported):
        return False
    for metric, old in zip(reported, order, strict=True):
        d = old.descriptor  # (`_Descriptor.describes`, inlined: every metric of every cycle)
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
        if old.points != list(map(_ATTRIBUTES, metric.points)):
            return False
    first: int | None = None
    for metric, old in zip(reported, order, strict=True):
        points = metric.points
        if points:
            old.time = points[0].time_unix_nano
        else:
            if first is None:
                first = _first_time(rm)
            if first is not None:
                old.time = first
    entry.resource = rm.resource  # (`_Identity.took`, inlined)
    entry.scope = rm.scope
    entry.scope_version = rm.scope_version
    entry.schema_url = rm.schema_url
    return True


class _Closed:
    """The closing points of one batch, by the resource they are sent under. Each point is a
    metric of its own: the Collector's prometheus exporter reads only a metric's first
    flagged point."""

    def __init__(self, wall: int) -> None:
        self._wall = wall
        # id of a head (one per resource sent, shared by its points) → (the head, its metrics)
        self._by_head: dict[int, tuple[_Head, list[Metric]]] = {}
        self.owed: list[_Owed] = []

    def missing(self, identity: Hashable, entry: _Identity, old: _Sent, new: _Sent) -> None:
        """Closes the points of `old` (of `entry`) that `new` lacks."""
        kept = {_key(attributes) for attributes in new.points}
        when = max(new.time, old.time + _MS)
        for attributes, head in old.sent(entry):
            key = _key(attributes)
            if key not in kept:
                self._owe(identity, old.descriptor, attributes, key, head, when)

    def all(self, identity: Hashable, entry: _Identity, old: _Sent, wall: int) -> None:
        when = max(wall, old.time + _MS)
        for attributes, head in old.sent(entry):
            self._owe(identity, old.descriptor, attributes, _key(attributes), head, when)

    def again(self, owed: _Owed) -> None:
        """An owed point whose request failed, sent now (never earlier than before)."""
        owed.when = max(self._wall, owed.when)
        self.owed.append(owed)
        self._add(owed.descriptor, owed.attributes, owed.head, owed.when)

    def _owe(
        self,
        identity: Hashable,
        d: _Descriptor,
        attributes: Mapping[str, Any],
        key: frozenset[tuple[str, str]],
        head: _Head,
        when: int,
    ) -> None:
        self.owed.append(_Owed((identity, d.name, key), d, attributes, head, when, self._wall))
        self._add(d, attributes, head, when)

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
