"""OpenTelemetry → Prometheus names, per the OpenTelemetry Prometheus compatibility spec.

Metric names: non-alphanumeric runs become one `_`, the unit becomes a suffix (`By` → `_bytes`,
`By/s` → `_bytes_per_second`, `1` on a gauge → `_ratio`, `{...}` annotations dropped), and a
monotonic sum ends in `_total`; a suffix the name already ends with is not repeated
(`otelgpu_collection_duration_seconds` with unit `s` stays as it is).

Label names: every character outside `[a-zA-Z0-9_]` becomes `_`; a name that would start with a
digit gets a `key_` prefix, and one that would start with `__` (reserved for Prometheus itself)
gets a `key` prefix (`__meta` → `key__meta`). The result always matches
`[a-zA-Z_][a-zA-Z0-9_]*` and never starts with `__`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from otelgpu.pdata.model import MetricKind

LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_NOT_LABEL_CHAR = re.compile(r"[^a-zA-Z0-9_]")
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]+")
_ANNOTATION = re.compile(r"\{[^}]*\}")

# UCUM units → the Prometheus unit words the spec lists.
_UNITS = {
    "d": "days",
    "h": "hours",
    "min": "minutes",
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "ns": "nanoseconds",
    "By": "bytes",
    "KiBy": "kibibytes",
    "MiBy": "mebibytes",
    "GiBy": "gibibytes",
    "TiBy": "tibibytes",
    "KBy": "kilobytes",
    "MBy": "megabytes",
    "GBy": "gigabytes",
    "TBy": "terabytes",
    "m": "meters",
    "V": "volts",
    "A": "amperes",
    "J": "joules",
    "W": "watts",
    "g": "grams",
    "Cel": "celsius",
    "Hz": "hertz",
    "%": "percent",
}
# The denominator of `X/Y` units is singular (`By/s` → `bytes_per_second`).
_PER_UNITS = {
    "s": "second",
    "m": "minute",
    "h": "hour",
    "d": "day",
    "w": "week",
    "mo": "month",
    "y": "year",
}


def replace_invalid(text: str) -> str:
    """`text` with every character outside `[a-zA-Z0-9_]` replaced by `_`."""
    return _NOT_LABEL_CHAR.sub("_", text)


def sanitize_label(key: str) -> str:
    """A valid, non-reserved Prometheus label name for an attribute key."""
    name = _NOT_LABEL_CHAR.sub("_", key)
    if not name:
        return "key_"
    if name[0].isdigit():
        return "key_" + name
    if name.startswith("__"):
        return "key" + name
    return name


@lru_cache(maxsize=4096)
def metric_name(name: str, unit: str, kind: MetricKind, monotonic: bool) -> str:
    """The Prometheus name of an OTel metric (cached: the set of metrics is small)."""
    words = [w for w in _NOT_ALNUM.split(name) if w]
    for suffix in _unit_words(unit, kind):
        if not _ends_with(words, suffix):
            words.extend(suffix)
    if kind is MetricKind.SUM and monotonic and not _ends_with(words, ["total"]):
        words.append("total")
    result = "_".join(words) or "metric"
    return "_" + result if result[0].isdigit() else result


def _unit_words(unit: str, kind: MetricKind) -> list[list[str]]:
    """The unit as suffix word groups: `By/s` → [["bytes", "per", "second"]]."""
    unit = _ANNOTATION.sub("", unit).strip()
    if unit == "1":
        return [["ratio"]] if kind is MetricKind.GAUGE else []
    if not unit:
        return []
    main, _, per = unit.partition("/")
    words = _words(_UNITS.get(main, main))
    if per:
        words += ["per", *_words(_PER_UNITS.get(per, per))]
    return [words] if words else []


def _words(text: str) -> list[str]:
    return [w for w in _NOT_ALNUM.split(text) if w]


def _ends_with(words: list[str], suffix: list[str]) -> bool:
    return len(words) >= len(suffix) and words[len(words) - len(suffix) :] == suffix


def namespaced(namespace: str, name: str) -> str:
    """`name` under the exporter's `namespace` (`gpu` → `gpu_hw_gpu_utilization_ratio`), as the
    Collector's prometheus exporter does. The agent's own `otelgpu_*` series keep their names,
    so the shipped alert rules and dashboards still find them."""
    if not namespace or name.startswith("otelgpu_"):
        return name
    return f"{namespace}_{name}"
