"""The encoded attributes of each attribute set an exporter sends, and of each metric's
descriptor, kept across batches (`AttributeCache`)."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

from otelgpu.exporters.otlp.wire import (
    FIELD_1,
    FIELD_2,
    POINT_ATTRIBUTES,
    RESOURCE_ATTRIBUTES,
    attribute_fields,
    length,
    string_field,
)
from otelgpu.pdata.model import Attributes, Metric, MetricKind
from otelgpu.pdata.semconv import PROCESS_PID

Descriptor = tuple[str, str, str, MetricKind, bool]  # name, description, unit, kind, monotonic


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
        self._by_id = {POINT_ATTRIBUTES: {}, RESOURCE_ATTRIBUTES: {}}
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
            key: attribute_fields(RESOURCE_ATTRIBUTES, {key: value})
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
        hit = self._by_id[POINT_ATTRIBUTES].get(id(attributes))  # the usual case, no call
        return hit[1] if hit is not None else self._get(POINT_ATTRIBUTES, attributes)

    def resource(self, attributes: Mapping[str, Any]) -> bytes:
        """The `resource` field of a ResourceMetrics holding `attributes` (present, if empty,
        when there are none: the message encoder marks it set)."""
        if not attributes and not self._defaults:
            return b"\x0a\x00"
        fields = self._get(RESOURCE_ATTRIBUTES, attributes)
        return FIELD_1 + length(len(fields)) + fields

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
                encoded = attribute_fields(tag, attributes)
                if tag == RESOURCE_ATTRIBUTES and self._defaults:
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
                string_field(FIELD_1, metric.name)
                + string_field(FIELD_2, metric.description)
                + string_field(b"\x1a", metric.unit)
            )
            found = self._descriptors[key] = (key, encoded)
        return found

    def pid(self, pid: Any) -> bytes:
        """A resource's `process.pid` as a point attribute field (`POINT_ATTRIBUTES`). Keyed
        with its type: `True == 1`, but not on the wire."""
        key = (pid, pid.__class__)
        found = self._pids.get(key)
        if found is None:
            found = self._pids[key] = attribute_fields(POINT_ATTRIBUTES, {PROCESS_PID: pid})
        return found

    def scope(self, name: str, version: str) -> bytes:
        """ScopeMetrics.scope = 1: InstrumentationScope name = 1, version = 2 (always present:
        the scope is always named)."""
        found = self._scopes.get((name, version))
        if found is None:
            body = string_field(FIELD_1, name) + string_field(FIELD_2, version)
            found = self._scopes[name, version] = FIELD_1 + length(len(body)) + body
        return found
