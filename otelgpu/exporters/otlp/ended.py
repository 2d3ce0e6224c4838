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
from typing import Any, NamedTuple

from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics

LIMIT = 65536  # identities remembered (a node has tens to thousands)
_MS = 1_000_000  # a closing point comes at least a millisecond after the series' last one


class _Head(NamedTuple):
    """One resource an identity sent: what a closing point is sent under."""

    resource: Any
    scope: str
    scope_version: str
    schema_url: str
    entries: int  # how many signature entries are this resource's


class _Descriptor(NamedTuple):
    """A metric as sent, without its points: one per metric name, shared by every cycle."""

    name: str
    unit: str
    description: str
    kind: MetricKind
    monotonic: bool


class _Sent(NamedTuple):
    # Each metric's descriptor, then its points' attribute mappings: the batch itself is not
    # kept (a cycle's points would stay alive until the next).
    signature: list[Any]
    heads: list[_Head]
    time: int  # the time of the identity's points when it was last reported


class EndedSeries:
    """What each identity sent last, and the closing points of what it stopped sending."""

    def __init__(self, wall: Callable[[], int] = time.time_ns, limit: int = LIMIT) -> None:
        self._wall = wall
        self._limit = limit
        self._sent: dict[Hashable, _Sent] = {}
        self._descriptors: dict[str, _Descriptor] = {}

    def __len__(self) -> int:
        return len(self._sent)

    def closing(self, batch: Batch) -> Batch:
        """The resources holding one flagged point per series that an identity reported in
        `batch` sent last time and not now; remembers what `batch` sends.

        Each cycle an identity's signature (metric descriptors and point attribute mappings,
        both shared from one cycle to the next) is compared with the last one; only when it
        differs are the series told apart one by one."""
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
            heads = []
            for rm in rms:
                if not rm.metrics:
                    continue
                first = len(signature)
                for metric in rm.metrics:
                    signature.append(self._descriptor(metric))
                    signature += [p.attributes for p in metric.points]
                heads.append(
                    _Head(
                        rm.resource,
                        rm.scope,
                        rm.scope_version,
                        rm.schema_url,
                        len(signature) - first,
                    )
                )
            now = _first_time(rms)
            before = sent.get(identity)
            if before is not None and before.signature != signature:
                when = max(now if now is not None else self._wall(), before.time + _MS)
                gone = len(heads) < len(rms)  # a resource without metrics: the "gone" marker
                out += _closing(before, signature, gone, when)
            if signature:
                sent[identity] = _Sent(signature, heads, now if now is not None else self._wall())
            elif before is not None:
                del sent[identity]
        while len(sent) > self._limit:
            del sent[next(iter(sent))]
        return tuple(out)

    def _descriptor(self, metric: Metric) -> _Descriptor:
        found = self._descriptors.get(metric.name)
        if (
            found is None
            or found.unit != metric.unit
            or found.description != metric.description
            or found.kind is not metric.kind
            or found.monotonic != metric.monotonic
        ):
            found = _Descriptor(
                metric.name, metric.unit, metric.description, metric.kind, metric.monotonic
            )
            if len(self._descriptors) >= self._limit:
                self._descriptors.clear()
            self._descriptors[metric.name] = found
        return found


def _first_time(rms: Sequence[ResourceMetrics]) -> int | None:
    for rm in rms:
        for metric in rm.metrics:
            for point in metric.points:
                return point.time_unix_nano
    return None


def _key(name: str, attributes: Any) -> tuple[str, frozenset[tuple[str, Any]]]:
    # The value's type is part of it: True, 1 and 1.0 are equal in Python, not on the wire.
    return name, frozenset((k, (type(v), v)) for k, v in attributes.items())


def _closing(before: _Sent, now: list[Any], gone: bool, when: int) -> list[ResourceMetrics]:
    """The closing resources of what `before` sent that the signature `now` lacks; only the
    metrics `now` reports are judged, unless the identity also said it is `gone`."""
    kept = set()
    judged = set()
    name = ""
    for entry in now:
        if entry.__class__ is _Descriptor:
            name = entry.name
            judged.add(name)
        else:
            kept.add(_key(name, entry))
    out: list[ResourceMetrics] = []
    at = 0
    for head in before.heads:
        metrics: list[Metric] = []
        descriptor: _Descriptor | None = None
        points: list[NumberDataPoint] = []
        for entry in before.signature[at : at + head.entries]:
            if entry.__class__ is _Descriptor:
                _add(metrics, descriptor, points)
                descriptor, points = entry, []
            elif (
                descriptor is not None
                and (gone or descriptor.name in judged)
                and _key(descriptor.name, entry) not in kept
            ):
                points.append(
                    NumberDataPoint(attributes=entry, time_unix_nano=when, value=math.nan)
                )
        _add(metrics, descriptor, points)
        at += head.entries
        if metrics:
            out.append(
                ResourceMetrics(
                    resource=head.resource,
                    metrics=tuple(metrics),
                    scope=head.scope,
                    scope_version=head.scope_version,
                    schema_url=head.schema_url,
                )
            )
    return out


def _add(
    metrics: list[Metric], descriptor: _Descriptor | None, points: list[NumberDataPoint]
) -> None:
    if descriptor is not None and points:
        metrics.append(
            Metric(
                name=descriptor.name,
                unit=descriptor.unit,
                description=descriptor.description,
                kind=descriptor.kind,
                monotonic=descriptor.monotonic,
                points=tuple(points),
            )
        )
