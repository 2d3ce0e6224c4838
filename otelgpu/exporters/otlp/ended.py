"""Series that end are closed downstream: one point flagged "no recorded value" each.

A pushed series has no scrape to miss: a backend fed by OTLP (Prometheus' OTLP endpoint, Mimir,
a Collector's prometheus or prometheusremotewrite exporter) keeps serving its last value until
its own lookback ends, five minutes in Prometheus. A holder that left a shared GPU would go on
being billed for its share that long, and a GPU that recovered would still read degraded.
OTLP's answer is the data point flag `FLAG_NO_RECORDED_VALUE`: each of those backends turns
such a point into a staleness marker (or drops the series), so the series ends at once.

`EndedSeries` remembers, per identity (`ResourceMetrics.identity`), the series it sent last.
When the identity reports a metric again, each series of that metric whose point attributes
it no longer reports gets one flagged point (value NaN, at the time the identity reports now),
under the resource and metric it was sent with. As the Prometheus exporter's sets, a metric the
identity does not report this time is left alone (another pipeline sending to the same
exporter may report it); an identity that reports no metrics at all in a batch (its "gone"
marker) closes everything it sent but what the same batch sends.

Point attributes decide, not resource attributes: a backend that keeps only point attributes
as labels (Prometheus' OTLP endpoint by default) sees a GPU whose pod changed as one continuing
series, and closing it there would mark the live series stale. What point attributes tell apart
is what ends: a holder's allocation series, a process, a GPU health state, a lost GPU's
readings.

Only identities are tracked (a resource without one is never closed), a new exporter (after
a reload) starts with no memory, and the memory holds at most `LIMIT` identities (the first
remembered are forgotten first; one still reporting is then remembered again).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from otelgpu.pdata.model import Batch, NumberDataPoint, ResourceMetrics

LIMIT = 65536  # identities remembered (a node has tens to thousands)
_MS = 1_000_000  # a closing point comes at least a millisecond after the series' last one


class _Sent(NamedTuple):
    signature: list[Any]  # each metric's name, then its points' attribute mappings
    resources: list[ResourceMetrics]  # what the identity sent (its points are not read again)
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
        `batch` sent last time and not now; remembers what `batch` sends.

        Each cycle an identity's signature (metric names and point attribute mappings, which
        receivers and processors share from one cycle to the next) is compared with the last
        one; only when it differs are the series told apart one by one."""
        grouped: dict[Hashable, list[ResourceMetrics]] = {}
        for rm in batch:
            if rm.identity is not None:
                found = grouped.get(rm.identity)
                if found is None:
                    grouped[rm.identity] = [rm]
                else:
                    found.append(rm)
        out: list[ResourceMetrics] = []
        sent = self._sent
        for identity, rms in grouped.items():
            signature: list[Any] = []
            for rm in rms:
                for metric in rm.metrics:
                    signature.append(metric.name)
                    signature += [p.attributes for p in metric.points]
            now = _first_time(rms)
            before = sent.get(identity)
            if before is not None and before.signature != signature:
                when = max(now if now is not None else self._wall(), before.time + _MS)
                out += _closing(before.resources, rms, when)
            if signature:
                sent[identity] = _Sent(signature, rms, now if now is not None else self._wall())
            elif before is not None:
                del sent[identity]
        while len(sent) > self._limit:
            del sent[next(iter(sent))]
        return tuple(out)


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
    before: Sequence[ResourceMetrics], now: Sequence[ResourceMetrics], when: int
) -> list[ResourceMetrics]:
    kept = {
        _key(metric.name, point.attributes)
        for rm in now
        for metric in rm.metrics
        for point in metric.points
    }
    # The metrics whose series are judged: those reported now, or all after a "gone" marker.
    judged = (
        None if any(not rm.metrics for rm in now) else {m.name for rm in now for m in rm.metrics}
    )
    out: list[ResourceMetrics] = []
    for rm in before:
        metrics = []
        for metric in rm.metrics:
            if judged is not None and metric.name not in judged:
                continue
            points = tuple(
                NumberDataPoint(attributes=point.attributes, time_unix_nano=when, value=math.nan)
                for point in metric.points
                if _key(metric.name, point.attributes) not in kept
            )
            if points:
                metrics.append(replace(metric, points=points))
        if metrics:
            out.append(
                ResourceMetrics(
                    resource=rm.resource,
                    metrics=tuple(metrics),
                    scope=rm.scope,
                    scope_version=rm.scope_version,
                    schema_url=rm.schema_url,
                )
            )
    return out
