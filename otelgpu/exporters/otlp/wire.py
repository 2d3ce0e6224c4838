"""The protobuf wire format of the few OTLP message parts the encoder writes: field tags, lengths,
strings, AnyValues and KeyValues (field numbers from opentelemetry-proto's
`metrics/v1/metrics.proto`, `common/v1/common.proto`, `resource/v1/resource.proto`). Shared by
the request encoder (`encode.py`) and its cache of encoded attribute sets
(`attribute_cache.py`)."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Field tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited).
POINT_START = 0x11  # NumberDataPoint.start_time_unix_nano = 2, fixed64
POINT_TIME = 0x19  # NumberDataPoint.time_unix_nano = 3, fixed64
POINT_DOUBLE = 0x21  # NumberDataPoint.as_double = 4, double
POINT_INT = 0x31  # NumberDataPoint.as_int = 6, sfixed64
POINT_ATTRIBUTES = 0x3A  # NumberDataPoint.attributes = 7
# NumberDataPoint.flags = 8 (varint) holding DataPointFlags.FLAG_NO_RECORDED_VALUE_MASK = 1
NO_RECORDED_VALUE = b"\x40\x01"
RESOURCE_ATTRIBUTES = 0x0A  # Resource.attributes = 1
FIELD_1 = b"\x0a"  # field 1, length-delimited: every repeated child here, and KeyValue.key
FIELD_2 = b"\x12"  # field 2, length-delimited: ScopeMetrics.metrics, KeyValue.value, ...
GAUGE = b"\x2a"  # Metric.gauge = 5
SUM = b"\x3a"  # Metric.sum = 7
# Sum.aggregation_temporality = 2 (CUMULATIVE = 2), Sum.is_monotonic = 3 (true)
CUMULATIVE = b"\x10\x02"
MONOTONIC = b"\x18\x01"

pack_d = struct.Struct("<Bd").pack
pack_q = struct.Struct("<Bq").pack
pack_times_d = struct.Struct("<BQBQBd").pack
pack_times_q = struct.Struct("<BQBQBq").pack
pack_time_d = struct.Struct("<BQBd").pack
pack_time_q = struct.Struct("<BQBq").pack
SMALL = [bytes((n,)) for n in range(128)]
# The varint of every length below 1 KiB (one or two bytes): most points, metrics and
# attribute sets, looked up instead of built.
LENGTHS = [*SMALL, *(bytes((n & 0x7F | 0x80, n >> 7)) for n in range(128, 1024))]


def schema_url_field(url: str) -> bytes:
    """Field 3 of ResourceMetrics and of ScopeMetrics (the same tag in both): `schema_url`."""
    data = url.encode()
    return b"\x1a" + length(len(data)) + data


def length(n: int) -> bytes:
    """A length as a varint; one and two bytes (every length below 16 KiB) without a loop."""
    if n < 1024:
        return LENGTHS[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    return varint(n)


def varint(n: int) -> bytes:
    """A base-128 varint; negative numbers as their 64-bit two's complement (int64 fields)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string_field(tag: bytes, text: str) -> bytes:
    """A string field (left out when empty, as proto3 does)."""
    if not text:
        return b""
    data = text.encode("utf-8")
    return tag + length(len(data)) + data


def any_value_bytes(value: Any) -> bytes:
    """An AnyValue; anything the model does not allow becomes its text."""
    cls = value.__class__
    data: bytes
    if cls is str:
        data = value.encode("utf-8")
        return b"\x0a" + length(len(data)) + data  # AnyValue.string_value = 1
    if cls is bool:
        return b"\x10\x01" if value else b"\x10\x00"  # AnyValue.bool_value = 2
    if cls is int and INT64_MIN <= value <= INT64_MAX:
        return b"\x18" + varint(value)  # AnyValue.int_value = 3
    if cls is float:
        return pack_d(0x21, value)  # AnyValue.double_value = 4
    data = str(value).encode("utf-8")
    return b"\x0a" + length(len(data)) + data


def key_value(key: str, value: Any) -> bytes:
    """KeyValue.key = 1, value = 2 (always present, even when empty)."""
    encoded = any_value_bytes(value)
    return string_field(FIELD_1, key) + FIELD_2 + length(len(encoded)) + encoded


def attribute_fields(tag: int, attributes: Mapping[str, Any]) -> bytes:
    """Every attribute as a repeated KeyValue field `tag` of its parent message."""
    prefix = SMALL[tag]
    out: list[bytes] = []
    for key, value in attributes.items():
        kv = key_value(key, value)
        out += (prefix, length(len(kv)), kv)
    return b"".join(out)
