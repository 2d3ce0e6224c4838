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
5. A label name that Prometheus gives a meaning to (`le` on histograms, `quantile` on
   summaries) is never rendered bare: it gets the `key_` prefix (`le` → `key_le`), as
   reserved `__` names already do (`naming.sanitize_label`: `__name__` → `key__name__`).

A device's series (its attributes have `hw.id`) leave out its static facts
(`device_info.FACTS`), which its info series carries instead (`info_prefix`: the device's
identity and facts, nothing a processor added). In `dcgm` naming they also leave out what
dcgm-exporter's labels do not have: a MIG instance's own `hw.id` (its `UUID` is its GPU's, its
`GPU_I_ID` tells it apart), `k8s.node.name` (`Hostname` is the node) and, unless
`dcgm_labels.pod_uid` asks for it as `pod_uid`, `k8s.pod.uid`; the driver version stays, as
dcgm-exporter's default `DCGM_FI_DRIVER_VERSION` label.

Values are made safe for every parser of the text format (`escape`, `cap`):
- `\\`, `"` and newline are escaped as the format says (`\\\\`, `\\"`, `\\n`);
- every other control character (C0 such as CR, VT, FF, NUL, ESC; DEL; C1 such as NEL), the
  Unicode line and paragraph separators and lone surrogates are replaced with U+FFFD: the
  format has no escape for them, and line-splitting parsers break on them (a lone surrogate
  cannot even be encoded as UTF-8);
- a value longer than `MAX_VALUE_LENGTH` (1024) characters is cut: its first 1007 characters,
  `…` and the first 16 hex digits of the SHA-256 of the whole value, so two long values that
  share a beginning stay two series. Kubernetes names are at most 253 characters and label
  values 63, so only hostile or broken data is cut. Cuts are counted when a series' line is
  rendered: the first time, and again if its cache entry was let go (the series went away for
  a whole rotation, or its resource got a replay plan, which holds its lines) and its resource
  changed since
  (`LabelRenderer.take_truncated`; the exporter publishes them as
  `otelgpu_prometheus_truncated_label_values_total`).

Rendering happens once per distinct series and is cached (`LabelRenderer.line_prefix`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Literal

from otelgpu.exporters.prometheus import dcgm, device_info
from otelgpu.exporters.prometheus.naming import replace_invalid, sanitize_label
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue

Naming = Literal["otel", "dcgm"]
AttrItems = tuple[tuple[str, AttrValue], ...]
LineKey = tuple[str, AttrItems, str]  # a series' family name, point attributes, `drop`

MAX_VALUE_LENGTH = 1024
_HASH_HEX = 16
_NAMES_KEPT = 4096  # attribute keys whose label names are remembered (`LabelRenderer._name`)
# `naming: dcgm` keeps dcgm-exporter's labels on a device's series: its facts but the driver
# version (its default DCGM_FI_DRIVER_VERSION label) go to the info series, and the node is
# `Hostname` already (k8s_attributes' `k8s.node.name` would say it twice).
DCGM_HIDDEN = (device_info.FACTS - {semconv.HW_DRIVER_VERSION}) | {semconv.K8S_NODE_NAME}
# Label names with a meaning of their own to Prometheus (module doc, rule 5).
RESERVED_NAMES = frozenset({"le", "quantile"})
# Characters the text format cannot carry in a label value or a HELP line (module doc).
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def label_value(value: AttrValue) -> str:
    """An attribute value as label text (booleans as `true`/`false`, like OTLP's JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def replace_unsafe(text: str) -> str:
    """`text` with every character the text format cannot carry replaced by U+FFFD."""
    return _UNSAFE.sub("\ufffd", text) if _UNSAFE.search(text) else text


def escape(value: str) -> str:
    """Escapes a label value for the text exposition format (and replaces what it cannot
    carry, see `replace_unsafe`)."""
    value = replace_unsafe(value)
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def cap(value: str) -> str:
    """`value` cut to `MAX_VALUE_LENGTH` characters, its hash keeping cut values apart."""
    if len(value) <= MAX_VALUE_LENGTH:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:_HASH_HEX]
    return value[: MAX_VALUE_LENGTH - _HASH_HEX - 1] + "\u2026" + digest


class LabelRenderer:
    """Builds the label text of series for one naming mode, and caches whole line prefixes
    (`name{labels} `) per resource, so a steady stream of batches renders nothing new.

    The cache is generational: `rotate()` (called once per `metric_expiration`) retires what
    was not used since the previous rotation, so pods that come and go do not grow it.
    """

    def __init__(
        self,
        naming: Naming,
        const_labels: Mapping[str, str],
        dcgm_labels: Mapping[str, str] | None = None,
    ) -> None:
        self._naming = naming
        self._dcgm_labels = dcgm.LABELS if dcgm_labels is None else dcgm_labels
        # The attribute dcgm-exporter calls `err_code` (a receiver's XID code), if any.
        self._xid_code = next(
            (k for k, v in self._dcgm_labels.items() if v == dcgm.XID_CODE_LABEL), None
        )
        self._const = tuple(const_labels.items())
        self._current: dict[AttrItems, dict[tuple[str, AttrItems | None, str], str]] = {}
        self._previous: dict[AttrItems, dict[tuple[str, AttrItems | None, str], str]] = {}
        self._truncated = 0
        # (key, mig) → `_name`'s answer: keys are few and each is named for every series
        self._names: dict[tuple[str, bool], tuple[str, bool]] = {}
        # Attributes of a device left off its series (on its info series, or not at all); in
        # dcgm naming the pod's UID too, unless asked for (`dcgm.label_names(pod_uid=True)`).
        if naming == "otel":
            self._hidden = device_info.FACTS
        elif semconv.K8S_POD_UID in self._dcgm_labels:
            self._hidden = DCGM_HIDDEN
        else:
            self._hidden = DCGM_HIDDEN | {semconv.K8S_POD_UID}

    def __len__(self) -> int:
        """Resources whose line prefixes are cached, in both generations."""
        return len(self._current) + len(self._previous)

    def take_truncated(self) -> int:
        """Label values cut to `MAX_VALUE_LENGTH` since the last call: once per series, when its
        line is first rendered (cached lines are not cut again)."""
        n, self._truncated = self._truncated, 0
        return n

    def lines(self, resource: AttrItems) -> dict[tuple[str, AttrItems | None, str], str]:
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

    def prefixes(self, resource: AttrItems, keys: Iterable[LineKey]) -> list[str]:
        """`line_prefix` of each (name, attributes, drop) of one resource, in order."""
        cache = self.lines(resource)
        out: list[str] = []
        for key in keys:
            prefix = cache.get(key)
            if prefix is None:
                name, attributes, drop = key
                prefix = cache[key] = name + self._build(resource, attributes, drop) + " "
            out.append(prefix)
        return out

    def info_prefix(self, name: str, resource: AttrItems) -> str:
        """`name{labels} ` of a device's info series: its identity labels and static facts
        (`device_info`), nothing a processor added (cached with the resource's lines)."""
        cache = self.lines(resource)
        key = (name, None, "")
        prefix = cache.get(key)
        if prefix is None:
            facts = tuple((k, v) for k, v in resource if k in device_info.ON_INFO)
            prefix = cache[key] = name + self._build(facts, (), "", info=True) + " "
        return prefix

    def forget(self, resource: AttrItems) -> None:
        """Drops the line-prefix cache of one resource (its lines are kept elsewhere: a
        replay plan holds them; a later `lines` call starts it afresh)."""
        self._current.pop(resource, None)
        self._previous.pop(resource, None)

    def rotate(self) -> None:
        """Starts a new cache generation; entries unused for a whole generation are dropped."""
        self._previous, self._current = self._current, {}

    def render(self, resource: AttrItems, attributes: AttrItems, drop: str = "") -> str:
        """`{a="1",b="2"}` (or "" with no labels) for one series; `drop` is a key to leave out."""
        return self._build(resource, attributes, drop)

    def _build(
        self, resource: AttrItems, attributes: AttrItems, drop: str, info: bool = False
    ) -> str:
        merged: dict[str, AttrValue] = dict(self._const)
        merged.update(resource)
        merged.update(attributes)
        merged.pop(drop, None)
        mig = semconv.HW_PARENT in merged
        if not info and semconv.HW_ID in merged:  # a device's: its facts are on its info series
            for key in self._hidden:
                merged.pop(key, None)
            if mig and self._naming == "dcgm":  # dcgm-exporter names a MIG instance by
                merged.pop(semconv.HW_ID, None)  # its GPU's UUID and GPU_I_ID only
        if self._naming == "dcgm":
            dcgm.derive(merged, mig, self._xid_code)  # MIG `device`, XID `err_msg`
        groups: dict[str, list[tuple[bool, str, str]]] = {}
        for key, value in merged.items():
            text = label_value(value)
            if text:
                name, authoritative = self._name(key, mig)
                groups.setdefault(name, []).append((not authoritative, key, text))
        pairs = [(name, self._cap(_resolve(group))) for name, group in groups.items()]
        pairs.sort()
        return "{" + ",".join(f'{n}="{escape(v)}"' for n, v in pairs) + "}" if pairs else ""

    def _cap(self, value: str) -> str:
        capped = cap(value)
        if capped is not value:
            self._truncated += 1
        return capped

    def _name(self, key: str, mig: bool) -> tuple[str, bool]:
        """The label name of an attribute key, and whether that name is authoritative."""
        found = self._names.get((key, mig))
        if found is None:
            if len(self._names) >= _NAMES_KEPT:  # keys sent by peers: keep the memo bounded
                self._names.clear()
            found = self._names[(key, mig)] = self._name_of(key, mig)
        return found

    def _name_of(self, key: str, mig: bool) -> tuple[str, bool]:
        if self._naming == "otel":
            name, authoritative = sanitize_label(key), False
        else:
            name, authoritative = dcgm_label(key, mig, self._dcgm_labels)
        return ("key_" + name, False) if name in RESERVED_NAMES else (name, authoritative)


def dcgm_label(key: str, mig: bool, labels: Mapping[str, str] = dcgm.LABELS) -> tuple[str, bool]:
    """dcgm-exporter's label for an attribute key (MIG instances: `UUID` is the parent GPU's)."""
    if mig and key == semconv.HW_PARENT:
        return "UUID", True
    if not (mig and key == semconv.HW_ID):
        mapped = labels.get(key)
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
