"""Closing points: one flagged "no recorded value" point per series that ended (`Closed`
builds a batch's), each owed until a request carrying it is accepted (`Owed`, settled through
the request's `Receipt`). Series are told apart as a backend's labels tell them apart
(`series_key`)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

from otelgpu.exporters.otlp.ended.sent import Descriptor, Head, Remembered, Sent
from otelgpu.pdata.model import Batch, Metric, NumberDataPoint, ResourceMetrics

MS = 1_000_000  # a closing point comes at least a millisecond after the metric's last points


OwedKey = tuple[Hashable, str, frozenset[tuple[str, str]]]  # identity, metric, attributes


class Owed:
    """A closing point no accepted request has carried yet."""

    __slots__ = ("attributes", "descriptor", "due", "head", "key", "since", "when")

    def __init__(
        self,
        key: OwedKey,
        descriptor: Descriptor,
        attributes: Mapping[str, Any],
        head: Head,
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


Receipt = tuple[Owed, ...]  # the closing points one request carries, to settle


class Closed:
    """The closing points of one batch, by the resource they are sent under. Each point is a
    metric of its own: the Collector's prometheus exporter reads only a metric's first
    flagged point."""

    def __init__(self, wall: int) -> None:
        self._wall = wall
        # id of a head (one per resource sent, shared by its points) → (the head, its metrics)
        self._by_head: dict[int, tuple[Head, list[Metric]]] = {}
        self.owed: list[Owed] = []

    def missing(self, identity: Hashable, entry: Remembered, old: Sent, new: Sent) -> None:
        """Closes the points of `old` (of `entry`) that `new` lacks."""
        kept = {series_key(attributes) for attributes in new.points}
        when = max(new.time, old.time + MS)
        for attributes, head in old.sent(entry):
            key = series_key(attributes)
            if key not in kept:
                self._owe(identity, old.descriptor, attributes, key, head, when)

    def all(self, identity: Hashable, entry: Remembered, old: Sent, wall: int) -> None:
        when = max(wall, old.time + MS)
        for attributes, head in old.sent(entry):
            self._owe(identity, old.descriptor, attributes, series_key(attributes), head, when)

    def again(self, owed: Owed) -> None:
        """An owed point whose request failed, sent now (never earlier than before)."""
        owed.when = max(self._wall, owed.when)
        self.owed.append(owed)
        self._add(owed.descriptor, owed.attributes, owed.head, owed.when)

    def _owe(
        self,
        identity: Hashable,
        d: Descriptor,
        attributes: Mapping[str, Any],
        key: frozenset[tuple[str, str]],
        head: Head,
        when: int,
    ) -> None:
        self.owed.append(Owed((identity, d.name, key), d, attributes, head, when, self._wall))
        self._add(d, attributes, head, when)

    def _add(self, d: Descriptor, attributes: Mapping[str, Any], head: Head, when: int) -> None:
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


def series_key(attributes: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
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
