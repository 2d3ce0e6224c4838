"""The internal model → an OTLP `ExportMetricsServiceRequest`, written straight to wire bytes.

Every point of every cycle passes through here, and building opentelemetry-proto messages from
Python costs several µs per point, so `encode_bytes` writes the protobuf wire format of the few
fixed message shapes the agent sends itself (field numbers from opentelemetry-proto's
`metrics/v1/metrics.proto`, `common/v1/common.proto`, `resource/v1/resource.proto`). The bytes
are exactly what `SerializeToString` of the same messages gives (proto3: a field at its default
is left out, fields in field-number order, a oneof member always written); the unit tests hold
it to that byte for byte on many batches. `encode` parses them back into the message for
callers that want one.

An exporter keeps one `AttributeCache` (`attribute_cache.py`) across batches: a GPU's attribute
set is the same cycle after cycle, so its KeyValues are encoded once. The cache may also carry
resource attributes to add to every resource that lacks them (the exporter's `service.*`). The
wire format's pieces (tags, lengths, strings, KeyValues) are in `wire.py`.

Two things keep points apart for a backend that drops resource attributes (Prometheus' OTLP
endpoint keeps only point attributes and `job`/`instance` by default): every point of a
resource with `process.pid` carries the pid as a point attribute too (after its own, unless it
has one), and GPU points carry `hw.id` from the receiver.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from otelgpu.exporters.otlp.attribute_cache import AttributeCache
from otelgpu.exporters.otlp.ended.trail import Trail
from otelgpu.exporters.otlp.wire import (
    CUMULATIVE,
    FIELD_1,
    FIELD_2,
    GAUGE,
    INT64_MAX,
    INT64_MIN,
    LENGTHS,
    MONOTONIC,
    NO_RECORDED_VALUE,
    POINT_DOUBLE,
    POINT_INT,
    POINT_START,
    POINT_TIME,
    SUM,
    any_value_bytes,
    length,
    pack_d,
    pack_q,
    pack_time_d,
    pack_time_q,
    pack_times_d,
    pack_times_q,
    schema_url_field,
)
from otelgpu.pdata.model import Batch, Metric, MetricKind
from otelgpu.pdata.semconv import PROCESS_PID

__all__ = ["AttributeCache", "any_value", "encode", "encode_bytes", "encode_closing_bytes"]


def encode(batch: Batch, cache: AttributeCache | None = None) -> ExportMetricsServiceRequest:
    """`encode_bytes` of `batch` as an opentelemetry-proto message."""
    request: ExportMetricsServiceRequest = ExportMetricsServiceRequest.FromString(
        encode_bytes(batch, cache)
    )
    return request


def encode_bytes(
    batch: Batch, cache: AttributeCache | None = None, trail: Trail | None = None
) -> bytes:
    """The request body of `batch` as sent on the wire (uncompressed): one ScopeMetrics per
    resource, sums as cumulative with their start time, ints as `as_int` and floats as
    `as_double`; a resource's `process.pid` also on each of its points. `trail`, if given, is
    filled with what the batch sends, for the ended-series memory (`ended/trail.py`): it is
    written down here, in the loops that read those fields anyway, at one list append per
    point, two per metric and two per resource instead of a walk of its own."""
    if cache is None:
        cache = AttributeCache()
    cache.begin_batch()
    try:
        return _request(batch, cache, trail=trail)
    finally:
        cache.end_batch()


def encode_closing_bytes(batch: Batch, cache: AttributeCache | None = None) -> bytes:
    """The request body of `batch` with every point written as a closing point (`ended/`):
    its time, a NaN `as_double`, its attributes and `flags` = FLAG_NO_RECORDED_VALUE. Two
    encoded requests joined are one request holding both (a repeated field, concatenated).
    Written after a batch's `encode_bytes` with the same cache, it does not trim the cache
    again (a batch's generation of attribute sets lives until the next batch)."""
    if cache is None:
        cache = AttributeCache()
    try:
        return _request(batch, cache, _closing_metric)
    finally:
        cache.end_batch()


def _request(
    batch: Batch,
    cache: AttributeCache,
    write: Callable[..., bytes] | None = None,
    trail: Trail | None = None,
) -> bytes:
    """The request of `batch`, each metric written by `write` (`_metric` by default); with
    `trail`, each metric is written down in it, then the resource after its metrics."""
    write = _metric if write is None else write
    series = None if trail is None else trail.series
    times = None if trail is None else trail.times
    out: list[bytes] = []
    for rm in batch:
        scope = cache.scope(rm.scope, rm.scope_version)
        metrics = [scope]
        pid = rm.resource.get(PROCESS_PID)
        extra = b"" if pid is None else cache.pid(pid)
        for metric in rm.metrics:
            body = write(metric, cache, extra, series, times)
            metrics += (FIELD_2, length(len(body)), body)
        if trail is not None:
            trail.series += (rm.identity, scope, rm.schema_url, len(rm.metrics))
            trail.resources.append(rm.resource)
        schema = schema_url_field(rm.schema_url) if rm.schema_url else b""
        metrics.append(schema)  # ScopeMetrics.schema_url (3)
        scope_metrics = b"".join(metrics)
        resource = cache.resource(rm.resource)
        n = len(scope_metrics)
        size = len(resource) + 1 + len(length(n)) + n + len(schema)
        out += (FIELD_1, length(size), resource, FIELD_2, length(n), scope_metrics, schema)
    return b"".join(out)


def _metric(
    metric: Metric,
    cache: AttributeCache,
    extra: bytes = b"",
    series: list[Any] | None = None,
    times: list[int | None] | None = None,
) -> bytes:
    """One Metric: its descriptor, then gauge or sum with every point; `extra` (the resource's
    pid as a point attribute field) ends every point's attributes that lack the pid. With a
    trail's `series` and `times`, what the metric sends is written down in them (`Trail`):
    each point's encoded attributes (the cache's, before the pid), then the descriptor; its
    last point's time."""
    point_attributes = cache.point_attributes
    parts: list[bytes] = []
    time: int | None = None  # (the last point's, once written)
    for p in metric.points:
        value, time, start = p.value, p.time_unix_nano, p.start_time_unix_nano
        mapping = p.attributes
        if isinstance(value, float):
            tag, double = POINT_DOUBLE, True
        elif INT64_MIN <= value <= INT64_MAX:
            tag, double = POINT_INT, False
        else:  # a counter past int64 still has a meaningful (if rounded) value
            value, tag, double = float(value), POINT_DOUBLE, True
        if start and time:
            pack = pack_times_d if double else pack_times_q
            head = pack(POINT_START, start, POINT_TIME, time, tag, value)
        elif time or start:
            pack = pack_time_d if double else pack_time_q
            head = pack(POINT_START if start else POINT_TIME, start or time, tag, value)
        else:
            head = (pack_d if double else pack_q)(tag, value)
        fields = point_attributes(mapping) if mapping else b""
        if series is not None:
            series.append(fields)
        if extra and PROCESS_PID not in mapping:  # (`_with_pid`, inlined: every point)
            fields += extra
        size = len(head) + len(fields)
        parts += (FIELD_1, LENGTHS[size] if size < 1024 else length(size), head, fields)
    described, descriptor = cache.described(metric)
    if series is not None:
        series.append(described)
        times.append(time)  # type: ignore[union-attr]
    return _wrapped(metric, parts, descriptor)


def _wrapped(metric: Metric, parts: list[bytes], descriptor: bytes) -> bytes:
    """The Metric: its descriptor (encoded), then its points (`parts`) inside its gauge or
    sum."""
    if metric.kind is MetricKind.SUM:
        parts.append(CUMULATIVE)
        if metric.monotonic:
            parts.append(MONOTONIC)
        data_tag = SUM
    else:
        data_tag = GAUGE
    data = b"".join(parts)
    return descriptor + data_tag + length(len(data)) + data


def _closing_metric(metric: Metric, cache: AttributeCache, extra: bytes = b"", *_: None) -> bytes:
    """`_metric` for closing points: no value but NaN, and the no-recorded-value flag (never
    written down in a trail: `encode_closing_bytes` passes none)."""
    parts: list[bytes] = []
    for p in metric.points:
        mapping = p.attributes
        fields = cache.point_attributes(mapping) if mapping else b""
        point = (
            pack_time_d(POINT_TIME, p.time_unix_nano, POINT_DOUBLE, math.nan)
            + _with_pid(fields, mapping, extra)
            + NO_RECORDED_VALUE
        )
        parts += (FIELD_1, length(len(point)), point)
    return _wrapped(metric, parts, cache.described(metric)[1])


def _with_pid(fields: bytes, mapping: Mapping[str, Any], extra: bytes) -> bytes:
    """A point's encoded attributes `fields` ended by its resource's pid field `extra` (b"":
    none), unless the point has a pid of its own."""
    return fields + extra if extra and PROCESS_PID not in mapping else fields


def any_value(value: Any) -> AnyValue:
    """An attribute value as the message `encode_bytes` writes for it."""
    decoded: AnyValue = AnyValue.FromString(any_value_bytes(value))
    return decoded
