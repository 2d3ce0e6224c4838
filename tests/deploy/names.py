"""Which metric names exist, and which ones a PromQL expression uses.

A rule or dashboard query may only name a metric the agent really serves in its naming:
- a GPU metric: the prometheus exporter's translation of a catalog entry (`naming: otel`:
  `naming.metric_name`; `naming: dcgm`: the exporter's dcgm field for each split, the otel
  name where dcgm-exporter has none);
- self-telemetry: an `otelgpu_*` name that the agent's code spells out;
- what the bundle itself relies on from elsewhere: `up` (Prometheus) and `kube_node_labels`
  (kube-state-metrics), and the rules' own recorded series.

The PromQL reader is deliberately small: it drops strings, label matchers, ranges and the
`by/without/on/ignoring/group_*` label lists, then takes every identifier that is not a
function call or a keyword. `tests/deploy/test_names.py` checks it on known expressions.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from otelgpu.exporters.prometheus import dcgm
from otelgpu.exporters.prometheus.labels import dcgm_label
from otelgpu.exporters.prometheus.naming import metric_name, sanitize_label
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata.model import Metric
from otelgpu.receivers.nvml.dcgm_fields import DCGM_SPLIT
from otelgpu.receivers.nvml.dcgm_names import NAMING
from otelgpu.receivers.nvml.metrics import CATALOG

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = frozenset({"up", "kube_node_labels"})
# The GPU's own temperature limits, in both namings (hw.temperature.limit and
# nvidia.gpu.temperature.margin, both opt-in). A default rule may read them to judge each GPU by
# its own limits, because it falls back to a fixed line on a GPU that serves none (its promtool
# tests show both): they are never a rule's need.
OWN_LIMITS = frozenset(
    {
        "hw_temperature_limit_celsius",
        "nvidia_gpu_temperature_margin_celsius",
        "DCGM_FI_DEV_GPU_MAX_OP_TEMP",
        "DCGM_FI_DEV_SLOWDOWN_TEMP",
        "DCGM_FI_DEV_GPU_TEMP_LIMIT",
    }
)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![\w:$.])([a-zA-Z_:][\w:]*)(?![\w:])(\s*\()?")
_KEYWORDS = frozenset(
    {
        # modifiers and operators
        *("by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"),
        *("and", "or", "unless", "atan2", "inf", "nan"),
        # aggregations (their label list may come between the name and the parenthesis)
        *("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values"),
        *("bottomk", "topk", "quantile"),
    }
)


def metrics_in(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _LABEL_LIST.sub("", text)
    names: set[str] = set()
    for match in _IDENT.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in _KEYWORDS:
            continue
        names.add(name)
    return names


def grafana_query(expr: str) -> str:
    """A Grafana variable query as PromQL: `label_values(SELECTOR, label)` → `SELECTOR`."""
    match = re.fullmatch(r"\s*label_values\((.*),\s*[\w$]+\s*\)\s*", expr, re.DOTALL)
    if match:
        return match.group(1)
    if re.fullmatch(r"\s*label_values\(\s*[\w$]+\s*\)\s*", expr):
        return ""
    return expr


@cache
def catalog_names(default_only: bool = False) -> frozenset[str]:
    """Prometheus names of every catalog metric in `naming: otel` (with `default_only`, of
    those the nvml receiver emits by default), and of the metrics the processors add (the
    allocation series of k8s_attributes)."""
    from otelgpu.processors.k8s_attributes.allocations import allocation_metric

    allocation = allocation_metric(1.0, 0)
    added = metric_name(allocation.name, allocation.unit, allocation.kind, allocation.monotonic)
    return frozenset(
        metric_name(spec.name, spec.unit, spec.kind, spec.monotonic)
        for spec in CATALOG
        if spec.enabled or not default_only
    ) | {added}


@cache
def dcgm_names(default_only: bool = False) -> frozenset[str]:
    """Prometheus names of every catalog metric (with `default_only`, of those on by default)
    and the allocation series in `naming: dcgm`, as the exporter's translator picks them (each
    split of a split metric)."""
    from otelgpu.processors.k8s_attributes.allocations import allocation_metric

    translator = Translator("dcgm", {}, names=NAMING)
    allocation = allocation_metric(1.0, 0)
    metrics = [
        Metric(
            name=spec.name,
            unit=spec.unit,
            description=spec.description,
            kind=spec.kind,
            points=(),
            monotonic=spec.monotonic,
        )
        for spec in CATALOG
        if spec.enabled or not default_only
    ]
    names = {translator.target(allocation, {}).name}
    for metric in metrics:
        key, splits = DCGM_SPLIT.get(metric.name, ("", {"": ""}))
        names |= {translator.target(metric, {key: value}).name for value in splits}
    return frozenset(names)


def served(naming: str, default_only: bool = False) -> frozenset[str]:
    """GPU metric names the agent serves in `naming` (`otel` or `dcgm`): every one it can, or
    with `default_only` those of the nvml receiver's default `metric_set`."""
    return catalog_names(default_only) if naming == "otel" else dcgm_names(default_only)


@cache
def self_telemetry_names() -> frozenset[str]:
    """Every `otelgpu_*` series name written out in the agent's code (generated stubs aside)."""
    found: set[str] = set()
    for path in (ROOT / "otelgpu").rglob("*.py"):
        if "_proto" in path.parts:
            continue
        found.update(re.findall(r"[\"'](otelgpu_[a-z0-9_]+)[\"']", path.read_text()))
    return frozenset(found)


def _attribute_keys() -> set[str]:
    from otelgpu.pdata import semconv
    from otelgpu.receivers.nvml import metrics

    keys = {v for k, v in vars(semconv).items() if k.isupper() and isinstance(v, str)}
    keys |= {metrics.ERROR_TYPE, metrics.XID_CODE}
    keys |= {key for spec in metrics.CATALOG for key in spec.attributes}  # point attributes
    return {k for k in keys if not k.endswith(".")}


def known_labels(naming: str = "otel") -> frozenset[str]:
    """Label names GPU and self-telemetry series can carry (before the rules add their own),
    in `naming: otel` or `naming: dcgm` (dcgm-exporter's names where it has them, for a GPU
    and for a MIG instance, whose own UUID stays `hw_id`)."""
    if naming == "otel":
        return frozenset(sanitize_label(k) for k in _attribute_keys())
    labels = dcgm.label_names(points=NAMING.dcgm_labels)
    names = {dcgm_label(k, mig, labels)[0] for k in _attribute_keys() for mig in (False, True)}
    return frozenset(names | {"err_msg"})
