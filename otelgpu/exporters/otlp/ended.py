"""Series that end are closed downstream: one point flagged "no recorded value" each.

A pushed series has no scrape to miss: a backend fed by OTLP (Prometheus' OTLP endpoint, Mimir,
a Collector's prometheus or prometheusremotewrite exporter) keeps serving its last value until
its own lookback ends, five minutes in Prometheus. A holder that left a shared GPU would go on
being billed for its share that long, and a GPU that recovered would still read degraded.
OTLP's answer is the data point flag `FLAG_NO_RECORDED_VALUE`: each of those backends turns
such a point into a staleness marker (or drops the series), so the series ends at once.

`EndedSeries` remembers, per identity (`ResourceMetrics.identity`), the series it sent last.
When the identity reports again, each of those series whose metric and point attributes it
no longer reports gets one flagged point (value NaN, at the time the identity reports now),
under the resource and metric it was sent with. Point attributes decide, not resource
attributes: a backend that keeps only point attributes as labels (Prometheus' OTLP endpoint by
default) sees a GPU whose pod changed as one continuing series, and closing it there would
mark the live series stale. What point attributes tell apart is what ends: a holder's
allocation series, a process, a GPU health state, a MIG instance. An identity that reports no
metrics at all (its "gone" marker) closes everything it sent.

Only identities are tracked (a resource without one is never closed), a new exporter (after
a reload) starts with no memory, and the memory holds at most `LIMIT` identities (the oldest
reported are forgotten first).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics

LIMIT = 65536  # identities remembered (a node has tens to thousands)
_MS = 1_000_000  # a closing point comes at least a millisecond after the series' last one


class _MetricShape(NamedTuple):
    name: str
    unit: str
    description: str
    kind: MetricKind
    monotonic: bool
    points: tuple[Any, ...]  # each point's attribute mapping


class _ResourceShape(NamedTuple):
    resource: Any
    scope: str
    scope_version: str
    schema_url: str
    metrics: tuple[_MetricShape, ...]


class _Sent(NamedTuple):
    shape: tuple[_ResourceShape, ...]
    time: int  # the time of the identity's points when it was last reported


class EndedSeries:
    """What each identity sent last, and the closing points of what it stopped sending."""

    def __init__(self, wall: Callable[[], int] = time.time_ns, limit: int = LIMIT) -> None:
        self._wall = wall
        self._limit = limit
        self._sent: dict[Hashable, _Sent] = {}

    def __len__(self) -> int:
        return len(self._sent)

    def closing(self, batch: Batch) -> Batch:
        """The resources holding one flagged point per series that an identity reported in
        `batch` sent last time and not now; remembers what `batch` sends."""
        grouped: dict[Hashable, list[ResourceMetrics]] = {}
        for rm in batch:
            if rm.identity is not None:
                grouped.setdefault(rm.identity, []).append(rm)
        out: list[ResourceMetrics] = []
        sent = self._sent
        for identity, rms in grouped.items():
            shape = tuple(_shape(rm) for rm in rms if rm.metrics)
            now = _first_time(rms)
            before = sent.pop(identity, None)
            if before is not None and before.shape != shape:
                when = max(now if now is not None else self._wall(), before.time + _MS)
                out += _closing(before.shape, shape, when)
            if shape:
                sent[identity] = _Sent(shape, now if now is not None else self._wall())
        while len(sent) > self._limit:
            del sent[next(iter(sent))]
        return tuple(out)


def _shape(rm: ResourceMetrics) -> _ResourceShape:
    return _ResourceShape(
        rm.resource,
        rm.scope,
        rm.scope_version,
        rm.schema_url,
        tuple(
            _MetricShape(
                m.name,
                m.unit,
                m.description,
                m.kind,
                m.monotonic,
                tuple([p.attributes for p in m.points]),
            )
            for m in rm.metrics
        ),
    )


def _first_time(rms: Sequence[ResourceMetrics]) -> int | None:
    for rm in rms:
        for metric in rm.metrics:
            for point in metric.points:
                return point.time_unix_nano
    return None


def _key(name: str, attributes: Any) -> tuple[str, frozenset[tuple[str, Any]]]:
    # The value's type is part of it: True, 1 and 1.0 are equal in Python, not on the wire.
    return name, frozenset((k, (type(v), v)) for k, v in attributes.items())


def _closing(
    before: tuple[_ResourceShape, ...], now: tuple[_ResourceShape, ...], when: int
) -> list[ResourceMetrics]:
    kept = {
        _key(metric.name, attributes)
        for resource in now
        for metric in resource.metrics
        for attributes in metric.points
    }
    out: list[ResourceMetrics] = []
    for resource in before:
        metrics = []
        for metric in resource.metrics:
            points = tuple(
                NumberDataPoint(attributes=attributes, time_unix_nano=when, value=math.nan)
                for attributes in metric.points
                if _key(metric.name, attributes) not in kept
            )
            if points:
                metrics.append(
                    Metric(
                        name=metric.name,
                        unit=metric.unit,
                        description=metric.description,
                        kind=metric.kind,
                        monotonic=metric.monotonic,
                        points=points,
                    )
                )
        if metrics:
            out.append(
                ResourceMetrics(
                    resource=resource.resource,
                    metrics=tuple(metrics),
                    scope=resource.scope,
                    scope_version=resource.scope_version,
                    schema_url=resource.schema_url,
                )
            )
    return out
