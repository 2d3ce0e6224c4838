"""Attributes → one Prometheus label set, rendered as `{name="value",...}` text.

Every series carries its datapoint attributes, its resource's attributes and the configured
`const_labels`. The rules, applied in this order, make the result deterministic and free of
duplicate label names:

1. The same attribute key from several places: the datapoint's value wins over the resource's,
   and the resource's over a const label's (the more specific source wins).
2. Each key gets a label name: sanitized (`naming.sanitize_label`) in `otel` naming; in `dcgm`
   naming, dcgm-exporter's name where one exists (`dcgm.LABELS`, `dcgm.PREFIXES`).
3. Different keys that end up with the same label name: a dcgm-exporter name (rule 2) is
   authoritative and the others are dropped; otherwise the values are joined with `;` in the
   lexicographic order of the original keys, as the OpenTelemetry compatibility spec says.
4. Empty values are left out (Prometheus reads an empty label as no label).

Rendering happens once per distinct series and is cached (`LabelRenderer.line_prefix`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from otelgpu import semconv
from otelgpu.exporters.prometheus import dcgm
from otelgpu.exporters.prometheus.naming import replace_invalid, sanitize_label
from otelgpu.model import AttrValue

Naming = Literal["otel", "dcgm"]
AttrItems = tuple[tuple[str, AttrValue], ...]


def label_value(value: AttrValue) -> str:
    """An attribute value as label text (booleans as `true`/`false`, like OTLP's JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def escape(value: str) -> str:
    """Escapes a label value for the text exposition format."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


class LabelRenderer:
    """Builds the label text of series for one naming mode, and caches whole line prefixes
    (`name{labels} `) per resource, so a steady stream of batches renders nothing new.

    The cache is generational: `rotate()` (called once per `metric_expiration`) retires what
    was not used since the previous rotation, so pods that come and go do not grow it.
    """

    def __init__(self, naming: Naming, const_labels: Mapping[str, str]) -> None:
        self._naming = naming
        self._const = tuple(const_labels.items())
        self._current: dict[AttrItems, dict[tuple[str, AttrItems, str], str]] = {}
        self._previous: dict[AttrItems, dict[tuple[str, AttrItems, str], str]] = {}

    def lines(self, resource: AttrItems) -> dict[tuple[str, AttrItems, str], str]:
        """The line-prefix cache of one resource: (metric name, attributes, drop) → prefix."""
        cache = self._current.get(resource)
        if cache is None:
            cache = self._previous.pop(resource, None)
            if cache is None:
                cache = {}
            self._current[resource] = cache
        return cache

    def line_prefix(self, name: str, resource: AttrItems, attributes: AttrItems, drop: str) -> str:
        """`name{labels} ` for one series (cached)."""
        cache = self.lines(resource)
        key = (name, attributes, drop)
        prefix = cache.get(key)
        if prefix is None:
            prefix = cache[key] = name + self.render(resource, attributes, drop) + " "
        return prefix

    def rotate(self) -> None:
        """Starts a new cache generation; entries unused for a whole generation are dropped."""
        self._previous, self._current = self._current, {}

    def render(self, resource: AttrItems, attributes: AttrItems, drop: str = "") -> str:
        """`{a="1",b="2"}` (or "" with no labels) for one series; `drop` is a key to leave out."""
        return self._build(resource, attributes, drop)

    def _build(self, resource: AttrItems, attributes: AttrItems, drop: str) -> str:
        merged: dict[str, AttrValue] = dict(self._const)
        merged.update(resource)
        merged.update(attributes)
        merged.pop(drop, None)
        mig = semconv.HW_PARENT in merged
        groups: dict[str, list[tuple[bool, str, str]]] = {}
        for key, value in merged.items():
            text = label_value(value)
            if text:
                name, authoritative = self._name(key, mig)
                groups.setdefault(name, []).append((not authoritative, key, text))
        pairs = [(name, _resolve(group)) for name, group in groups.items()]
        pairs.sort()
        return "{" + ",".join(f'{n}="{escape(v)}"' for n, v in pairs) + "}" if pairs else ""

    def _name(self, key: str, mig: bool) -> tuple[str, bool]:
        """The label name of an attribute key, and whether that name is authoritative."""
        if self._naming == "otel":
            return sanitize_label(key), False
        return dcgm_label(key, mig)


def dcgm_label(key: str, mig: bool) -> tuple[str, bool]:
    """dcgm-exporter's label for an attribute key (MIG instances: `UUID` is the parent GPU's)."""
    if mig and key == semconv.HW_PARENT:
        return "UUID", True
    if not (mig and key == semconv.HW_ID):
        mapped = dcgm.LABELS.get(key)
        if mapped is not None:
            return mapped, True
    for prefix, replacement in dcgm.PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            rest = key[len(prefix) :]
            name = replacement + replace_invalid(rest) if replacement else sanitize_label(rest)
            return name, False
    return sanitize_label(key), False


def _resolve(group: list[tuple[bool, str, str]]) -> str:
    """One value for a label name several keys produced (rule 3 of the module doc)."""
    if len(group) == 1:
        return group[0][2]
    group.sort()
    best = [entry for entry in group if entry[0] == group[0][0]]
    return ";".join(text for _, _, text in best)
