"""The internal model → `opentelemetry-proto` messages (`ExportMetricsServiceRequest`).

Written for speed because every point of every cycle passes through here: messages are
added in place to their parent's repeated fields (a message passed to a constructor is
copied), and the KeyValue list of an attribute set is built once and reused by every point
and resource that carries the same attributes (merged from a prototype point, which protobuf
copies in C rather than through Python objects). An exporter keeps one `AttributeCache`
across batches: a GPU's attribute set is the same cycle after cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, NumberDataPoint

from otelgpu.model import Batch, Metric, MetricKind

_CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def encode(batch: Batch, cache: AttributeCache | None = None) -> ExportMetricsServiceRequest:
    """One request holding every resource of `batch`: one ScopeMetrics per resource, sums
    as cumulative with their start time, ints as `as_int` and floats as `as_double`."""
    request = ExportMetricsServiceRequest()
    if cache is None:
        cache = AttributeCache()
    cache.begin_batch()
    add_resource = request.resource_metrics.add
    for rm in batch:
        out = add_resource()
        out.resource.attributes.extend(cache.get(rm.resource).attributes)
        scope_metrics = out.scope_metrics.add()
        scope_metrics.scope.name = rm.scope
        if rm.scope_version:
            scope_metrics.scope.version = rm.scope_version
        add_metric = scope_metrics.metrics.add
        for metric in rm.metrics:
            _add_points(add_metric, metric, cache)
    return request


def encode_bytes(batch: Batch, cache: AttributeCache | None = None) -> bytes:
    """The request body of `batch` as sent on the wire (uncompressed)."""
    body: bytes = encode(batch, cache).SerializeToString()
    return body


def _add_points(add_metric: Any, metric: Metric, cache: AttributeCache) -> None:
    out = add_metric(name=metric.name, unit=metric.unit, description=metric.description)
    if metric.kind is MetricKind.SUM:
        data = out.sum
        data.aggregation_temporality = _CUMULATIVE
        data.is_monotonic = metric.monotonic
    else:
        data = out.gauge
    # Marks the oneof even when the metric has no points, so the type still reaches the peer.
    data.SetInParent()
    add = data.data_points.add
    prototype = cache.get
    for p in metric.points:
        value = p.value
        if isinstance(value, float):
            dp = add(time_unix_nano=p.time_unix_nano, as_double=value)
        elif _INT64_MIN <= value <= _INT64_MAX:
            dp = add(time_unix_nano=p.time_unix_nano, as_int=int(value))
        else:  # a counter past int64 still has a meaningful (if rounded) value
            dp = add(time_unix_nano=p.time_unix_nano, as_double=float(value))
        if p.start_time_unix_nano:
            dp.start_time_unix_nano = p.start_time_unix_nano
        if p.attributes:
            dp.MergeFrom(prototype(p.attributes))


class AttributeCache:
    """A prototype point holding only the attributes, per attribute set.

    Looked up first by object identity within a batch (receivers and processors share one
    dict between many points), then by content, across batches. The content key carries each
    value's type because `True == 1 == 1.0` in Python but not on the wire. Bounded: past
    `limit` attribute sets (pods come and go) it starts over.
    """

    __slots__ = ("_by_content", "_by_id", "_limit")

    def __init__(self, limit: int = 16384) -> None:
        # Holding the attribute mapping beside its list keeps the id from being reused.
        self._by_id: dict[int, tuple[Mapping[str, Any], NumberDataPoint]] = {}
        self._by_content: dict[tuple[Any, ...], NumberDataPoint] = {}
        self._limit = limit

    def begin_batch(self) -> None:
        """Forgets identities (ids are reused once a batch is freed) and trims the cache."""
        self._by_id.clear()
        if len(self._by_content) > self._limit:
            self._by_content.clear()

    def get(self, attributes: Mapping[str, Any]) -> NumberDataPoint:
        hit = self._by_id.get(id(attributes))
        if hit is not None:
            return hit[1]
        items = tuple(attributes.items())
        key = (items, *map(type, attributes.values()))
        prototype = self._by_content.get(key)
        if prototype is None:
            prototype = NumberDataPoint(attributes=_key_values(items))
            self._by_content[key] = prototype
        self._by_id[id(attributes)] = (attributes, prototype)
        return prototype


def _key_values(items: Iterable[tuple[str, Any]]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in items]


def any_value(value: Any) -> AnyValue:
    """An attribute value on the wire; anything the model does not allow becomes its text."""
    cls = value.__class__
    if cls is str:
        return AnyValue(string_value=value)
    if cls is bool:
        return AnyValue(bool_value=value)
    if cls is int and _INT64_MIN <= value <= _INT64_MAX:
        return AnyValue(int_value=value)
    if cls is float:
        return AnyValue(double_value=value)
    return AnyValue(string_value=str(value))
