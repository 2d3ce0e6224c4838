"""The steady path: a whole batch that sends what the memory holds, checked in C (`Shape`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, itemgetter
from typing import Any

from otelgpu.exporters.otlp.ended.sent import ATTRIBUTES, Descriptor, Remembered
from otelgpu.exporters.otlp.ended.trail import Trail
from otelgpu.pdata.model import Batch

IDENTITY = attrgetter("identity")
_METRICS = attrgetter("metrics")
_POINTS = attrgetter("points")
# A metric's descriptor, field by field: compared as lists of references, no tuple built
_DESCRIPTOR_FIELDS = tuple(map(attrgetter, Descriptor._fields))
_TIME = attrgetter("time_unix_nano")
_LAST = itemgetter(-1)
_HEAD_FIELDS = ("resource", "scope", "scope_version", "schema_url")
_HEAD_GETTERS = tuple(map(attrgetter, _HEAD_FIELDS))


def _consume(iterator: Iterator[object]) -> None:
    """Runs `iterator` to its end in C (a map of `setattr` over many objects)."""
    deque(iterator, maxlen=0)


class Shape:
    """Which resources of a batch each renewed their identity alone (`shaped`: their
    positions), as flat lists of what a steady cycle shares with the last one: each
    resource's metric count, each metric's descriptor and point count, each point's attribute
    mapping. The same resources of the next batch with the same identities are compared with
    them in C, element by element (by identity first): no Python code runs per identity or
    point. The other resources (an identity sent from several, one that sent something else
    the last time) go the usual way.

    A steady batch changes no set, only what the closing points would be sent with: each
    metric's time, each identity's resource, when each identity was seen. Those are kept as
    flat lists here (`took`), not written into the entries, and the report times as three
    numbers; the entries take them (`settle`) only when the memory next looks at them: a
    batch that is not steady, a sweep, a reload. A steady cycle writes no entry.

    A batch whose encoder's trail (`trail.Trail`) is the one of the last batch this shape took
    is taken without being looked at (`took_from`): the comparisons are the trail's, and what
    the entries would take comes from its lists.

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
        "timed",
        "timed_at",
        "times",
        "trail",
        "walls",
        "with_points",
    )

    def __init__(
        self, size: int, shaped: list[int], batch: Batch, entries: list[Remembered]
    ) -> None:
        self.pick = picker(shaped)
        self.rest = picker(sorted(set(range(size)) - set(shaped)))
        self.entries = entries
        self.sents = list(chain.from_iterable(entry.order or () for entry in entries))
        descriptors = [sent.descriptor for sent in self.sents]
        self.descriptors = [list(map(getter, descriptors)) for getter in _DESCRIPTOR_FIELDS]
        picked = self.pick(batch)
        self.counts = list(map(len, map(_METRICS, picked)))
        metrics = list(chain.from_iterable(map(_METRICS, picked)))
        self.point_counts = list(map(len, map(_POINTS, metrics)))
        self.attributes = list(map(ATTRIBUTES, chain.from_iterable(map(_POINTS, metrics))))
        # Which metrics have points (None: all) and their records (`timed`), each of which
        # takes its last point's time. A metric without points has no series to close: its
        # time is never read.
        flags = list(map(bool, self.point_counts))
        self.with_points = None if all(flags) else flags
        self.timed = self.sents if self.with_points is None else list(compress(self.sents, flags))
        # Where each of `timed` is among the batch's metrics (a trail's `times`)
        starts = list(accumulate(map(len, map(_METRICS, batch)), initial=0))
        at = [index for i in shaped for index in range(starts[i], starts[i + 1])]
        self.timed_at = picker(at if self.with_points is None else list(compress(at, flags)))
        # Not settled yet (None: nothing pending): each sent metric's time, each entry's
        # resource fields (`_HEAD_FIELDS`, a list each), and the wall times of the first and
        # last steady batch with the longest time between two of them.
        self.times: list[int] | None = None
        self.heads: list[list[Any]] = []
        self.trail: Trail | None = None  # (after `took_from`: they are picked from it)
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
        if list(map(ATTRIBUTES, chain.from_iterable(points))) != self.attributes:
            return False
        self.heads = [list(map(getter, picked)) for getter in _HEAD_GETTERS]
        self._reported(wall)
        timed = points if self.with_points is None else compress(points, self.with_points)
        self.times = list(map(_TIME, map(_LAST, timed)))
        self.trail = None
        return True

    def took_from(self, trail: Trail, wall: int) -> None:
        """`took` of a batch whose trail's `series` is the one of the last batch this shape
        took (the caller compared them): the trail is held, and what the entries would take
        is picked from it only when they take it (`settle`). Only the resources and times
        change (scope and schema URL are the trail's, and equal)."""
        self._reported(wall)
        self.trail = trail

    def _reported(self, wall: int) -> None:
        """A steady batch at `wall`: the first and last of them, and the longest step."""
        if self.times is None and self.trail is None:
            self.walls = (wall, wall, 0)
        else:
            first, last, step = self.walls
            self.walls = (first, wall, max(step, wall - last))

    def settle(self) -> None:
        """The entries take what the steady batches since the last settle sent (what
        `renewed` and `Remembered.reported` do for each)."""
        trail = self.trail
        if trail is not None:  # the last steady batch's resources and times
            resources = list(self.pick(trail.resources))
            if self.heads:  # the scopes of a batch `took` looked at, pending: kept
                self.heads[0] = resources
            else:
                self.heads = [resources]
            self.times = list(self.timed_at(trail.times))
        times = self.times
        if times is None:
            return
        entries = self.entries
        _consume(map(setattr, self.timed, repeat("time"), times))
        # (after `took_from` alone: the resources only)
        for field, values in zip(_HEAD_FIELDS, self.heads, strict=False):
            _consume(map(setattr, entries, repeat(field), values))
        first, last, step = self.walls
        for entry in entries:
            entry.gap = max(entry.gap, first - entry.seen, step)
            entry.seen = last
        self.times, self.heads, self.trail = None, [], None


def picker(indices: list[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A function giving the items of a sequence (a batch's resources, a trail's list) at
    `indices`, as a tuple (in C)."""
    if not indices:
        return lambda _batch: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda batch: (batch[only],)
    return itemgetter(*indices)
