"""Splits a `ListPodResourcesResponse` into its pods' bytes without parsing them.

protobuf's own parser does the splitting (the answer read as `repeated bytes pod_resources = 1`,
a few tens of microseconds for a thousand pods); when it refuses the bytes, the reader below
walks them again to say what was wrong and at which byte.

A kubelet builds the `List` answer from a Go map, so the same pods come back in a new order
on most calls. Splitting the answer into its `pod_resources` entries (field 1) lets the client
see that the set of pods is the same, and parse only the pods that changed. Only the outer
message is read here: tags and lengths (varints), nothing inside a pod. Other top-level fields
(a newer kubelet's) are skipped by their wire type, as protobuf skips unknown fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

POD_RESOURCES = 1  # ListPodResourcesResponse.pod_resources
_POD_TAG = POD_RESOURCES << 3 | 2
_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5
_MAX_VARINT_BYTES = 10
_MAX_FIELD = (1 << 29) - 1
_MAX_GROUP_DEPTH = 100  # protobuf's own recursion limit


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message; says what was wrong and at which byte."""


def _entries_type() -> Any:
    """A message class of one field, `repeated bytes pod_resources = 1`: protobuf then hands
    each pod's bytes over unparsed."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="otelgpu/pod_entries.proto", package="otelgpu.internal", syntax="proto3"
    )
    entries = proto.message_type.add(name="PodEntries")
    entries.field.add(
        name="pod_resources",
        number=POD_RESOURCES,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("otelgpu.internal.PodEntries")
    )


_ENTRIES = _entries_type()


def split_pods(raw: bytes) -> list[bytes]:
    """The bytes of each `pod_resources` entry of a `List` answer, in the answer's order.
    WireError (what and where) when the bytes are not a protobuf message."""
    entries = _ENTRIES()
    try:
        entries.ParseFromString(raw)
    except DecodeError:
        read_pods(raw)  # raises the WireError that says where
        raise WireError(f"the {len(raw)}-byte answer is not a protobuf message") from None
    return list(entries.pod_resources)


def read_pods(raw: bytes) -> list[bytes]:
    """`split_pods` by hand: tags and lengths only; names the fault and its byte."""
    pods: list[bytes] = []
    append = pods.append
    pos, start, end = 0, 0, len(raw)
    try:
        while pos < end:
            # Fast path, nearly every entry: tag 0x0a (field 1, length-delimited), then a
            # length of one or two bytes (a pod under 16 KiB). A thousand pods are split in a
            # fraction of a millisecond only if this loop stays this short.
            if raw[pos] == _POD_TAG:
                low = raw[pos + 1]
                if low < 0x80:
                    start = pos + 2
                    pos = start + low
                elif raw[pos + 2] < 0x80:
                    start = pos + 3
                    pos = start + ((low & 0x7F) | (raw[pos + 2] << 7))
                else:
                    start, length = _length(raw, pos + 1, POD_RESOURCES)
                    pos = start + length
                append(raw[start:pos])
            else:
                pos = _other_field(raw, pos, append)
    except IndexError:  # a tag or length with the answer's end in its middle
        raise WireError(f"the {end}-byte answer is cut short in its last field") from None
    if pos > end:  # only the last entry can run past the end
        raise _past_end(POD_RESOURCES, start, pos - start, end)
    return pods


def _other_field(raw: bytes, pos: int, append: Callable[[bytes], None]) -> int:
    """Reads any field the fast path does not (a longer tag or length, another field), keeping
    a pod; returns the position after it."""
    field, wire_type, pos = _tag(raw, pos)
    if wire_type != _LENGTH:  # protobuf, too, treats a known field of another type as unknown
        return _skip(raw, pos, field, wire_type, 0)
    start, length = _length(raw, pos, field)
    if field == POD_RESOURCES:
        append(raw[start : start + length])
    return start + length


def _length(raw: bytes, pos: int, field: int) -> tuple[int, int]:
    """(start, length) of a length-delimited value whose length varint is at `pos`."""
    length, start = _varint(raw, pos)
    if start + length > len(raw):
        raise _past_end(field, start, length, len(raw))
    return start, length


def _past_end(field: int, start: int, length: int, end: int) -> WireError:
    return WireError(
        f"field {field} at byte {start}: length {length} runs past the end of the {end}-byte answer"
    )


def _tag(raw: bytes, pos: int, *, in_group: bool = False) -> tuple[int, int, int]:
    """(field number, wire type, position after the tag). Inside a group the field number is
    not checked: protobuf does not look at what an unknown group holds."""
    at = pos
    key, pos = _varint(raw, pos)
    field, wire_type = key >> 3, key & 7
    if not in_group and (field == 0 or field > _MAX_FIELD):
        raise WireError(f"byte {at}: field number {field} is out of range")
    if wire_type > _FIXED32:
        raise WireError(f"byte {at}: field {field} has wire type {wire_type}, which does not exist")
    return field, wire_type, pos


def _skip(raw: bytes, pos: int, field: int, wire_type: int, depth: int) -> int:
    """The position after the value of a field not kept (its tag already read)."""
    if wire_type == _VARINT:
        return _varint(raw, pos)[1]
    if wire_type in (_FIXED64, _FIXED32):
        after = pos + (8 if wire_type == _FIXED64 else 4)
        if after > len(raw):
            raise WireError(f"byte {pos}: field {field} is cut short")
        return after
    if wire_type == _LENGTH:
        start, length = _length(raw, pos, field)
        return start + length
    if wire_type == _START_GROUP:
        return _skip_group(raw, pos, field, depth + 1)
    raise WireError(f"byte {pos}: field {field} ends a group that was never started")


def _skip_group(raw: bytes, pos: int, field: int, depth: int) -> int:
    """The position after a (long-deprecated) group's end tag."""
    if depth > _MAX_GROUP_DEPTH:
        raise WireError(f"byte {pos}: groups nested deeper than {_MAX_GROUP_DEPTH}")
    while pos < len(raw):
        at = pos
        inner, wire_type, pos = _tag(raw, pos, in_group=True)
        if wire_type == _END_GROUP:
            if inner != field:
                raise WireError(f"byte {at}: group {field} closed as group {inner}")
            return pos
        pos = _skip(raw, pos, inner, wire_type, depth)
    raise WireError(f"group {field} is never closed")


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it)."""
    value, shift, at = 0, 0, pos
    while pos < len(raw):
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if pos - at >= _MAX_VARINT_BYTES:
            raise WireError(f"byte {at}: varint longer than {_MAX_VARINT_BYTES} bytes")
    raise WireError(f"byte {at}: varint cut short by the end of the answer")
