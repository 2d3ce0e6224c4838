"""The internal model → an OTLP `ExportMetricsServiceRequest`, written straight to wire bytes.

Every point of every cycle passes through here, and building opentelemetry-proto messages from
Python costs several µs per point, so `encode_bytes` writes the protobuf wire format of the few
fixed message shapes the agent sends itself (field numbers from opentelemetry-proto's
`metrics/v1/metrics.proto`, `common/v1/common.proto`, `resource/v1/resource.proto`). The bytes
are exactly what `SerializeToString` of the same messages gives (proto3: a field at its default
is left out, fields in field-number order, a oneof member always written); the unit tests hold
it to that byte for byte on many batches. `encode` parses them back into the message for
callers that want one.

An exporter keeps one `AttributeCache` across batches: a GPU's attribute set is the same cycle
after cycle, so its KeyValues are encoded once. The cache may also carry resource attributes to
add to every resource that lacks them (the exporter's `service.*`).

Two things keep points apart for a backend that drops resource attributes (Prometheus' OTLP
endpoint keeps only point attributes and `job`/`instance` by default): every point of a
resource with `process.pid` carries the pid as a point attribute too (after its own, unless it
has one), and GPU points carry `hw.id` from the receiver.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from itertools import chain
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from otelgpu.exporters.otlp.ended.trail import Trail
from otelgpu.pdata.model import Attributes, Batch, Metric, MetricKind
from otelgpu.pdata.semconv import PROCESS_PID

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
Descriptor = tuple[str, str, str, MetricKind, bool]  # name, description, unit, kind, monotonic

# Field tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited).
_POINT_START = 0x11  # NumberDataPoint.start_time_unix_nano = 2, fixed64
_POINT_TIME = 0x19  # NumberDataPoint.time_unix_nano = 3, fixed64
_POINT_DOUBLE = 0x21  # NumberDataPoint.as_double = 4, double
_POINT_INT = 0x31  # NumberDataPoint.as_int = 6, sfixed64
_POINT_ATTRIBUTES = 0x3A  # NumberDataPoint.attributes = 7
# NumberDataPoint.flags = 8 (varint) holding DataPointFlags.FLAG_NO_RECORDED_VALUE_MASK = 1
_NO_RECORDED_VALUE = b"\x40\x01"
_RESOURCE_ATTRIBUTES = 0x0A  # Resource.attributes = 1
_FIELD_1 = b"\x0a"  # field 1, length-delimited: every repeated child here, and KeyValue.key
_FIELD_2 = b"\x12"  # field 2, length-delimited: ScopeMetrics.metrics, KeyValue.value, ...
_GAUGE = b"\x2a"  # Metric.gauge = 5
_SUM = b"\x3a"  # Metric.sum = 7
# Sum.aggregation_temporality = 2 (CUMULATIVE = 2), Sum.is_monotonic = 3 (true)
_CUMULATIVE = b"\x10\x02"
_MONOTONIC = b"\x18\x01"

_pack_d = struct.Struct("<Bd").pack
_pack_q = struct.Struct("<Bq").pack
_pack_time = struct.Struct("<BQ").pack
_pack_times = struct.Struct("<BQBQ").pack
_pack_times_d = struct.Struct("<BQBQBd").pack
_pack_times_q = struct.Struct("<BQBQBq").pack
_pack_time_d = struct.Struct("<BQBd").pack
_pack_time_q = struct.Struct("<BQBq").pack
_SMALL = [bytes((n,)) for n in range(128)]
# The varint of every length below 1 KiB (one or two bytes): most points, metrics and
# attribute sets, looked up instead of built.
_LENGTHS = [*_SMALL, *(bytes((n & 0x7F | 0x80, n >> 7)) for n in range(128, 1024))]


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
    written down here, in the loops that read those fields anyway, at a few list appends per
    point instead of a walk of its own."""
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
    write: Callable[[Metric, AttributeCache, bytes], bytes] | None = None,
    trail: Trail | None = None,
) -> bytes:
    write = _metric if write is None else write
    out: list[bytes] = []
    for rm in batch:
        scope = cache.scope(rm.scope, rm.scope_version)
        metrics = [scope]
        pid = rm.resource.get(PROCESS_PID)
        extra = b"" if pid is None else cache.pid(pid)
        if trail is None:
            for metric in rm.metrics:
                body = write(metric, cache, extra)
                metrics += (_FIELD_2, _length(len(body)), body)
        else:  # the same, each metric written down (`_metric`), then the resource after them
            for metric in rm.metrics:
                body = _metric(metric, cache, extra, trail)
                metrics += (_FIELD_2, _length(len(body)), body)
            trail.series += (rm.identity, scope, rm.schema_url, len(rm.metrics))
            trail.resources.append(rm.resource)
        schema = _schema_url(rm.schema_url) if rm.schema_url else b""
        metrics.append(schema)  # ScopeMetrics.schema_url (3)
        scope_metrics = b"".join(metrics)
        resource = cache.resource(rm.resource)
        n = len(scope_metrics)
        size = len(resource) + 1 + len(_length(n)) + n + len(schema)
        out += (_FIELD_1, _length(size), resource, _FIELD_2, _length(n), scope_metrics, schema)
    return b"".join(out)


def _metric(
    metric: Metric, cache: AttributeCache, extra: bytes = b"", trail: Trail | None = None
) -> bytes:
    """One Metric: its descriptor, then gauge or sum with every point; `extra` (the resource's
    pid as a point attribute field) ends every point's attributes that lack the pid. With
    `trail`, what the metric sends is written down in it (`Trail`): each point's attribute
    mapping, then its point count and descriptor; its first point's time."""
    attributes = _point_attributes(cache, extra)
    parts: list[bytes] = []
    points = metric.points
    seen = None
    if trail is not None:
        seen = trail.series
        trail.times.append(points[0].time_unix_nano if points else None)
    for p in points:
        value, time, start = p.value, p.time_unix_nano, p.start_time_unix_nano
        mapping = p.attributes
        if seen is not None:
            seen.append(mapping)
        if isinstance(value, float):
            tag, double = _POINT_DOUBLE, True
        elif _INT64_MIN <= value <= _INT64_MAX:
            tag, double = _POINT_INT, False
        else:  # a counter past int64 still has a meaningful (if rounded) value
            value, tag, double = float(value), _POINT_DOUBLE, True
        if start and time:
            pack = _pack_times_d if double else _pack_times_q
            head = pack(_POINT_START, start, _POINT_TIME, time, tag, value)
        elif time or start:
            pack = _pack_time_d if double else _pack_time_q
            head = pack(_POINT_START if start else _POINT_TIME, start or time, tag, value)
        else:
            head = (_pack_d if double else _pack_q)(tag, value)
        point = head + attributes(mapping) if mapping else head + extra
        size = len(point)
        parts += (_FIELD_1, _LENGTHS[size] if size < 1024 else _length(size), point)
    described, descriptor = cache.described(metric)
    if seen is not None:
        seen.append(len(points))
        seen.append(described)
    return _wrapped(metric, cache, parts, descriptor)


def _wrapped(metric: Metric, cache: AttributeCache, parts: list[bytes], descriptor: bytes) -> bytes:
    """The Metric: its descriptor (encoded), then its points (`parts`) inside its gauge or
    sum."""
    if metric.kind is MetricKind.SUM:
        parts.append(_CUMULATIVE)
        if metric.monotonic:
            parts.append(_MONOTONIC)
        data_tag = _SUM
    else:
        data_tag = _GAUGE
    data = b"".join(parts)
    return descriptor + data_tag + _length(len(data)) + data


def _closing_metric(metric: Metric, cache: AttributeCache, extra: bytes = b"") -> bytes:
    """`_metric` for closing points: no value but NaN, and the no-recorded-value flag."""
    attributes = _point_attributes(cache, extra)
    parts: list[bytes] = []
    for p in metric.points:
        point = (
            _pack_time_d(_POINT_TIME, p.time_unix_nano, _POINT_DOUBLE, math.nan)
            + (attributes(p.attributes) if p.attributes else extra)
            + _NO_RECORDED_VALUE
        )
        parts += (_FIELD_1, _length(len(point)), point)
    return _wrapped(metric, cache, parts, cache.described(metric)[1])


def _point_attributes(cache: AttributeCache, extra: bytes) -> Callable[[Mapping[str, Any]], bytes]:
    """A point's encoded attributes, ended by the resource's pid field `extra` if there is one."""
    return _adding(cache.point_attributes, extra) if extra else cache.point_attributes


def _adding(
    attributes: Callable[[Mapping[str, Any]], bytes], extra: bytes
) -> Callable[[Mapping[str, Any]], bytes]:
    """`attributes` followed by the pid field `extra`, unless the point has a pid of its own."""

    def encoded(point: Mapping[str, Any]) -> bytes:
        fields = attributes(point)
        return fields if PROCESS_PID in point else fields + extra

    return encoded


def _schema_url(url: str) -> bytes:
    """Field 3 of ResourceMetrics and of ScopeMetrics (the same tag in both): `schema_url`."""
    data = url.encode()
    return b"\x1a" + _length(len(data)) + data


def _length(n: int) -> bytes:
    """A length as a varint; one and two bytes (every length below 16 KiB) without a loop."""
    if n < 1024:
        return _LENGTHS[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    return _varint(n)


def _varint(n: int) -> bytes:
    """A base-128 varint; negative numbers as their 64-bit two's complement (int64 fields)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(tag: bytes, text: str) -> bytes:
    """A string field (left out when empty, as proto3 does)."""
    if not text:
        return b""
    data = text.encode("utf-8")
    return tag + _length(len(data)) + data


def _any_value(value: Any) -> bytes:
    """An AnyValue; anything the model does not allow becomes its text."""
    cls = value.__class__
    data: bytes
    if cls is str:
        data = value.encode("utf-8")
        return b"\x0a" + _length(len(data)) + data  # AnyValue.string_value = 1
    if cls is bool:
        return b"\x10\x01" if value else b"\x10\x00"  # AnyValue.bool_value = 2
    if cls is int and _INT64_MIN <= value <= _INT64_MAX:
        return b"\x18" + _varint(value)  # AnyValue.int_value = 3
    if cls is float:
        return _pack_d(0x21, value)  # AnyValue.double_value = 4
    data = str(value).encode("utf-8")
    return b"\x0a" + _length(len(data)) + data


def _key_value(key: str, value: Any) -> bytes:
    """KeyValue.key = 1, value = 2 (always present, even when empty)."""
    encoded = _any_value(value)
    return _string(_FIELD_1, key) + _FIELD_2 + _length(len(encoded)) + encoded


def _attribute_fields(tag: int, attributes: Mapping[str, Any]) -> bytes:
    """Every attribute as a repeated KeyValue field `tag` of its parent message."""
    prefix = _SMALL[tag]
    out: list[bytes] = []
    for key, value in attributes.items():
        kv = _key_value(key, value)
        out += (prefix, _length(len(kv)), kv)
    return b"".join(out)


def any_value(value: Any) -> AnyValue:
    """An attribute value as the message `encode_bytes` writes for it."""
    decoded: AnyValue = AnyValue.FromString(_any_value(value))
    return decoded


class AttributeCache:
    """The encoded attributes of each attribute set, and of each metric's descriptor.

    Attribute sets are looked up first by object identity within a batch (receivers and
    processors share one dict between many points), then by content, across batches. The
    content key carries each value's type because `True == 1 == 1.0` in Python but not on the
    wire. Bounded by generations: past `limit` entries (pods come and go) the entries become
    the old generation, and only those found again move back; the rest are dropped at the next
    turn. A batch with more attribute sets than `limit` therefore keeps them all across batches
    (two generations at most) rather than encoding them again each time, so the cost per point
    stays flat as batches grow.

    `resource_defaults` are added after a resource's own attributes, each one only where the
    resource has no value for its key; they are fixed for the cache's life, so a resource's
    cached encoding (keyed by its own attributes) already holds them.
    """

    __slots__ = (
        "_by_content",
        "_by_id",
        "_defaults",
        "_descriptors",
        "_limit",
        "_older",
        "_pids",
        "_scopes",
    )
    _by_id: dict[int, dict[int, tuple[Mapping[str, Any], bytes]]]

    def __init__(self, limit: int = 16384, resource_defaults: Attributes | None = None) -> None:
        # Holding the attribute mapping beside its bytes keeps the id from being reused.
        # field tag → id of an attribute mapping → (the mapping, its encoding)
        self._by_id = {_POINT_ATTRIBUTES: {}, _RESOURCE_ATTRIBUTES: {}}
        self._by_content: dict[tuple[Any, ...], bytes] = {}
        self._older: dict[tuple[Any, ...], bytes] = {}  # the generation before
        # name, description, unit, kind, monotonic → (that key, the encoded name, description
        # and unit)
        self._descriptors: dict[Descriptor, tuple[Descriptor, bytes]] = {}
        self._scopes: dict[tuple[str, str], bytes] = {}
        # (pid, its type) → the pid as a point attribute field: one per GPU process, every cycle
        self._pids: dict[tuple[Any, type], bytes] = {}
        self._limit = limit
        # key → its encoded Resource.attributes field
        self._defaults = {
            key: _attribute_fields(_RESOURCE_ATTRIBUTES, {key: value})
            for key, value in (resource_defaults or {}).items()
        }

    def begin_batch(self) -> None:
        """Forgets identities (ids are reused once a batch is freed) and trims the cache."""
        self.end_batch()
        if len(self._by_content) > self._limit:
            self._older, self._by_content = self._by_content, {}
        if len(self._descriptors) > self._limit:
            self._descriptors.clear()
        if len(self._pids) > self._limit:  # processes come and go
            self._pids.clear()

    def end_batch(self) -> None:
        """Lets go of the batch's attribute mappings (held only to keep their ids unique while
        it is encoded), so a sent batch is not kept alive until the next one (P3)."""
        for by_id in self._by_id.values():
            by_id.clear()

    def point_attributes(self, attributes: Mapping[str, Any]) -> bytes:
        """A point's attributes as its repeated `attributes` fields."""
        hit = self._by_id[_POINT_ATTRIBUTES].get(id(attributes))  # the usual case, no call
        return hit[1] if hit is not None else self._get(_POINT_ATTRIBUTES, attributes)

    def resource(self, attributes: Mapping[str, Any]) -> bytes:
        """The `resource` field of a ResourceMetrics holding `attributes` (present, if empty,
        when there are none: the message encoder marks it set)."""
        if not attributes and not self._defaults:
            return b"\x0a\x00"
        fields = self._get(_RESOURCE_ATTRIBUTES, attributes)
        return _FIELD_1 + _length(len(fields)) + fields

    def _get(self, tag: int, attributes: Mapping[str, Any]) -> bytes:
        by_id = self._by_id[tag]
        hit = by_id.get(id(attributes))
        if hit is not None:
            return hit[1]
        # One flat tuple (keys and values alternating, then the value types): a tuple of
        # pairs would cost a 72-byte object per attribute in every cached key (P3).
        key = (tag, *chain.from_iterable(attributes.items()), *map(type, attributes.values()))
        encoded = self._by_content.get(key)
        if encoded is None:
            encoded = self._older.pop(key, None)
            if encoded is None:
                encoded = _attribute_fields(tag, attributes)
                if tag == _RESOURCE_ATTRIBUTES and self._defaults:
                    missing = (f for k, f in self._defaults.items() if k not in attributes)
                    encoded += b"".join(missing)
            self._by_content[key] = encoded
        by_id[id(attributes)] = (attributes, encoded)
        return encoded

    def described(self, metric: Metric) -> tuple[Descriptor, bytes]:
        """`metric`'s descriptor (one object per descriptor while the cache keeps it: what
        a `Trail` holds of each metric), and its encoding: Metric.name = 1, description = 2,
        unit = 3."""
        key = (metric.name, metric.description, metric.unit, metric.kind, metric.monotonic)
        found = self._descriptors.get(key)
        if found is None:
            encoded = (
                _string(_FIELD_1, metric.name)
                + _string(_FIELD_2, metric.description)
                + _string(b"\x1a", metric.unit)
            )
            found = self._descriptors[key] = (key, encoded)
        return found

    def pid(self, pid: Any) -> bytes:
        """A resource's `process.pid` as a point attribute field (`_POINT_ATTRIBUTES`). Keyed
        with its type: `True == 1`, but not on the wire."""
        key = (pid, pid.__class__)
        found = self._pids.get(key)
        if found is None:
            found = self._pids[key] = _attribute_fields(_POINT_ATTRIBUTES, {PROCESS_PID: pid})
        return found

    def scope(self, name: str, version: str) -> bytes:
        """ScopeMetrics.scope = 1: InstrumentationScope name = 1, version = 2 (always present:
        the scope is always named)."""
        found = self._scopes.get((name, version))
        if found is None:
            body = _string(_FIELD_1, name) + _string(_FIELD_2, version)
            found = self._scopes[name, version] = _FIELD_1 + _length(len(body)) + body
        return found
