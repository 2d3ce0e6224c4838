"""`EndedSeries`: the memory of what each identity sent, and the closing points it owes (the
package doc says what it promises)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from otelgpu.exporters.otlp.ended.closing import Closed, Owed, OwedKey, Receipt, series_key
from otelgpu.exporters.otlp.ended.sent import (
    Descriptor,
    Head,
    Remembered,
    Sent,
    first_time,
    renewed,
)
from otelgpu.exporters.otlp.ended.steady import IDENTITY, Shape
from otelgpu.exporters.otlp.ended.trail import Trail
from otelgpu.pdata.model import Batch, Metric, ResourceMetrics

LIMIT = 16384  # identities remembered (a node has tens to thousands)
FORGET_AFTER = 300_000_000_000  # ns: an identity unreported this long is forgotten (5 minutes)
_SWEEP = 60_000_000_000  # ns between two looks for identities to forget
_SHAPES = 4  # whole batches remembered (one per pipeline sending to the exporter, usually)
# After a reload, the gap assumed for an identity reported only once before it: the receivers'
# default collection interval is 10s, so twice this waits for three of their cycles.
_UNKNOWN_GAP = 15_000_000_000


class EndedSeries:
    """What each identity sent last, per metric, and the closing points of what it stopped
    sending, owed until a request carrying them is accepted."""

    def __init__(self, wall: Callable[[], int] = time.time_ns, limit: int = LIMIT) -> None:
        self._wall = wall
        self._limit = limit
        self._sent: dict[Hashable, Remembered] = {}
        self._descriptors: dict[str, Descriptor] = {}
        self._swept = wall()
        self._owed: dict[OwedKey, Owed] = {}
        self._owing: dict[Hashable, int] = {}  # identity → how many of its points are owed
        self._due: list[Owed] = []  # owed points whose request failed
        # After a reload: identity → the metrics it sent before and has not reported since
        self._inherited: dict[Hashable, set[str]] = {}
        self._inherited_from: int | None = None  # wall time of the first batch after it
        # Whole batches that sent exactly what is remembered, by their identities (`Shape`)
        self._shapes: dict[tuple[Hashable, ...], Shape] = {}
        # The shape whose last steady batch its entries do not hold yet (`_catch_up`)
        self._pending: Shape | None = None
        self._last_key: tuple[Hashable, ...] | None = None  # the last batch's identities
        # The shape that took the last batch, and that batch's trail (`Trail.series`)
        self._steady: tuple[Shape, list[object]] | None = None

    def __len__(self) -> int:
        return len(self._sent)

    @property
    def owed(self) -> int:
        """Closing points not carried by an accepted request yet."""
        return len(self._owed)

    def closing(self, batch: Batch) -> Batch:
        """The closing resources of `batch` (see `closes`), left unsettled."""
        return self.closes(batch)[0]

    def closes(self, batch: Batch, trail: Trail | None = None) -> tuple[Batch, Receipt]:
        """The resources holding one flagged point per series that an identity reported in
        `batch` sent last time and not now, with the points still owed from requests that
        failed; remembers what `batch` sends. The receipt settles them (`accepted`,
        `refused`). `trail` is what the encoder wrote down of `batch` (`Trail`; None: not
        written down).

        Each metric's point attribute mappings (shared by receivers and processors from one
        cycle to the next) are compared with the last ones; only when they differ are the
        series told apart one by one. An identity that sent the same series as last time is
        updated in place, and no object per identity or series is made (nothing for the
        cyclic garbage collector to scan). When a batch has the same identities as the last
        two, the resources that each renewed an identity alone last time (`Shape`) are checked
        together, in C, not identity by identity, and what they would update is kept as a few
        flat lists until the memory next looks (`_catch_up`); the others go the usual way.
        When `trail` is the last batch's and a shape took that batch, the shape takes this one
        from the trail alone: nothing in `batch` is looked at but the others."""
        wall = self._wall()
        shapes = self._shapes
        rest = batch
        key: tuple[Hashable, ...] | None = None
        steady, self._steady = self._steady, None
        if not self._due and not self._inherited:
            shape: Shape | None = None
            if trail is not None and steady is not None and trail.series == steady[1]:
                shape = steady[0]
                shape.took_from(trail, wall)
            else:
                try:
                    key = tuple(map(IDENTITY, batch))
                    hash(key)
                except TypeError:  # an unhashable identity: not tracked, no shape
                    key = None
                known = shapes.get(key) if shapes and key is not None else None
                if known is not None and known.took(batch, wall):
                    shape = known
            if shape is not None:
                if self._pending is not shape:
                    self._catch_up()
                    self._pending = shape
                if trail is not None:  # until a shape is dropped (`_drop_shapes`)
                    self._steady = (shape, trail.series)
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
        closed = Closed(wall)
        sent = self._sent
        inherited = self._inherited
        for identity, found in grouped.items():
            before = sent.get(identity)
            if isinstance(found, list):
                rms = found
            elif before is not None and renewed(before, found):
                gap = wall - before.seen  # (`Remembered.reported`, inlined: every identity)
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
                    sent[identity] = before = Remembered(now, wall, rms[0])
                else:
                    before.reported(wall)
                before.renew(now, rms)
            elif before is not None:
                del sent[identity]
        if key is not None:
            if key == self._last_key and key not in shapes and not self._due:
                self._remember_shape(batch, key, trail)
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

    def _owe(self, points: list[Owed]) -> Receipt:
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

    def _settle(self, point: Owed) -> None:
        del self._owed[point.key]
        identity = point.key[0]
        left = self._owing[identity] - 1
        if left:
            self._owing[identity] = left
        else:
            del self._owing[identity]

    def _came_back(self, identity: Hashable, now: dict[str, Sent]) -> None:
        """Owed points of series `identity` sends again are owed no more."""
        owed = self._owed
        for name, entry in now.items():
            for attributes in entry.points:
                point = owed.get((identity, name, series_key(attributes)))
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

    def _close_overdue(self, closed: Closed, wall: int) -> None:
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

    def _metrics(self, rms: list[ResourceMetrics], wall: int) -> dict[str, Sent]:
        """What `rms` send, by metric (a metric without points: at its resource's time)."""
        out: dict[str, Sent] = {}
        for rm in rms:
            if not rm.metrics:
                continue
            head = Head.of(rm)
            first = first_time(rm)
            if first is None:
                first = wall
            for metric in rm.metrics:
                points = metric.points
                at = points[-1].time_unix_nano if points else first
                attributes = [p.attributes for p in points]
                entry = out.get(metric.name)
                if entry is None:
                    out[metric.name] = Sent(self._descriptor(metric), attributes, head, at)
                else:
                    entry.extend(attributes, head, at)
        return out

    def _descriptor(self, metric: Metric) -> Descriptor:
        found = self._descriptors.get(metric.name)
        if found is None or not found.describes(metric):
            found = Descriptor.of(metric)
            if len(self._descriptors) >= self._limit:
                self._descriptors.clear()
            self._descriptors[metric.name] = found
        return found

    def _remember_shape(
        self, batch: Batch, key: tuple[Hashable, ...], trail: Trail | None = None
    ) -> None:
        """Remembers which resources of `batch` (whose identities are `key`, written down in
        `trail` if given) sent alone what their identity holds now, in the order it holds
        it."""
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
        ]
        if not shaped:
            return
        if len(self._shapes) >= _SHAPES:
            self._drop_shapes()
        picked = [entries[index] for index in shaped]
        assert all(entry is not None for entry in picked)
        shape = Shape(len(batch), shaped, batch, picked)  # type: ignore[arg-type]
        self._shapes[key] = shape
        if trail is not None:  # as if the shape had taken `batch`
            self._steady = (shape, trail.series)

    def _catch_up(self) -> None:
        """Has the entries of the pending shape take what its last steady batch sent."""
        if self._pending is not None:
            self._pending.settle()
            self._pending = None

    def _drop_shapes(self) -> None:
        """Forgets every shape (what one lists is about to change), settled first."""
        self._catch_up()
        self._shapes.clear()
        self._steady = None

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
