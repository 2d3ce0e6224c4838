"""Batches → series in the store, in `otel` or `dcgm` naming.

Resource attributes become labels on every series of that resource (a GPU's `hw.id`,
`k8s.pod.name`, ... are what users filter and join on, and the agent's resources are few and
small), instead of the spec's separate `target_info` series that every query would have to join.

Every series is written on behalf of its resource's identity (see `series.py`), so one GPU is one
series per metric whatever its labels did. `shared_gpu_series: per_holder` opts into
dcgm-exporter's `--kubernetes-virtual-gpus` shape instead: a shared GPU's series are copied once
per holder (from the `nvidia.gpu.allocation` series k8s_attributes sends), with the holder's labels
and its replica ID; sums over such copies count the GPU once per holder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from otelgpu import semconv
from otelgpu.exporters.prometheus import dcgm
from otelgpu.exporters.prometheus.labels import AttrItems, LabelRenderer, Naming
from otelgpu.exporters.prometheus.naming import metric_name, namespaced
from otelgpu.exporters.prometheus.series import Family, SeriesStore, format_value
from otelgpu.model import Attributes, Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.receivers.nvml import metrics as catalog

SharedGpuSeries = Literal["device", "per_holder"]


@dataclass(frozen=True, slots=True)
class Target:
    """Where the points of one metric go: family name, type, help, value scale."""

    name: str
    type: str
    help: str
    scale: float = 1.0
    drop: str = ""  # an attribute not rendered as a label (the one that chose a dcgm field)
    convert: dcgm.Convert | None = None  # after `scale`: dcgm's integers, the XID code


class Translator:
    """Turns batches into store updates; remembers names and label sets it already built."""

    def __init__(
        self,
        naming: Naming,
        const_labels: Mapping[str, str],
        shared_gpu_series: SharedGpuSeries = "device",
        dcgm_labels: Mapping[str, str] | None = None,
        namespace: str = "",
    ) -> None:
        self._naming = naming
        self._namespace = namespace
        self._per_holder = shared_gpu_series == "per_holder"
        self.labels = LabelRenderer(naming, const_labels, dcgm_labels)
        self._targets: dict[tuple[str, str, MetricKind, bool, str, object], Target] = {}
        self._by_name: dict[str, tuple[MetricKind, bool, str, str, Target]] = {}

    def ingest(self, store: SeriesStore, batch: Batch, now: float) -> tuple[int, int]:
        """Stores every point of `batch` as updated at `now`; (stored, dropped) point counts.

        Each resource's identity then holds exactly the lines this batch wrote for it."""
        stored = dropped = 0
        store.begin(now)
        holders = _holders_by_device(batch) if self._per_holder else {}
        for rm in batch:
            items = tuple(rm.resource.items())
            # No identity from the receiver: its attributes as they are here are the identity.
            identity = store.key(rm.identity if rm.identity is not None else items)
            copies = holders.get(rm.resource.get(semconv.HW_ID)) if holders else None
            if copies and not _is_allocation(rm) and semconv.PROCESS_PID not in rm.resource:
                resources = [_holder_copy(rm.resource, holder) for holder in copies]
            else:
                resources = [items]
            for resource in resources:
                ok, points = self._ingest_resource(store, identity, resource, rm.metrics, now)
                stored += ok
                dropped += points - ok
        store.commit()
        return stored, dropped

    def families(self, rm: ResourceMetrics, now: float) -> list[Family]:
        """Families for the agent's self-telemetry: datapoint labels and const labels only (the
        agent's resource is the same on every series and says nothing the target labels don't)."""
        store = SeriesStore()
        self._ingest_resource(store, 0, (), rm.metrics, now)  # bad points: left out
        return list(store.families.values())

    def _ingest_resource(
        self,
        store: SeriesStore,
        identity: int,
        resource: AttrItems,
        metrics: tuple[Metric, ...],
        now: float,
    ) -> tuple[int, int]:
        """Every metric of one resource (copy); how many points it stored, of how many. A
        metric with bad data stores none of its points, and never raises.

        This runs for every metric of every batch, so the common path is inlined: the target
        remembered by metric name, the family already there, `Family.write`."""
        lines = self.labels.lines(resource)  # once per resource, not per metric
        split = catalog.DCGM_SPLIT if self._naming == "dcgm" else {}
        by_name, families, touched = self._by_name, store.families, store.touched_families
        batch = store.batch
        stored = total = 0
        for metric in metrics:
            points = metric.points
            total += len(points)
            try:
                if metric.name in split:
                    stored += self._ingest_split(store, identity, resource, metric, now)
                    continue
                hit = by_name.get(metric.name)
                if (
                    hit is not None
                    and hit[0] is metric.kind
                    and hit[1] == metric.monotonic
                    and hit[2] == metric.unit
                    and hit[3] == metric.description
                ):
                    target = hit[4]
                else:
                    target = self._plain_target(metric)
                name = target.name
                family = families.get(name)
                if family is not None and family.type == target.type:
                    touched[name] = family
                else:
                    family = store.family(name, target.type, target.help)
                    if family is None:
                        continue  # the name belongs to a family of another type
                stored += self._write(family, identity, resource, lines, target, points, batch)
            except (TypeError, ValueError, AttributeError):
                continue  # bad data: counted as dropped, never raised into the pipeline
        return stored, total

    def _write(
        self,
        family: Family,
        identity: int,
        resource: AttrItems,
        lines: dict[tuple[str, AttrItems, str], str],
        target: Target,
        points: tuple[NumberDataPoint, ...],
        batch: int,
    ) -> int:
        """`Family.write` of each point, inlined; how many points were numbers."""
        name, scale, convert = target.name, target.scale, target.convert
        series, stamps, owners = family.series, family.stamps, family.owners
        family.touched[identity] = None
        stored = 0
        for point in points:
            value = point.value
            if (
                convert is None
                and value.__class__ is float
                and scale == 1.0
                and value - value == 0.0
            ):
                text = repr(value)  # format_value's common case (finite), without the call
            else:
                try:
                    value = value * scale if scale != 1.0 else value
                    if convert is not None:  # dcgm naming: integer fields, the XID code
                        value = convert(value, point.attributes)
                    text = format_value(value)
                except (TypeError, ValueError, OverflowError):
                    continue  # not a number: counted as dropped by the caller
            attributes = tuple(point.attributes.items()) if point.attributes else ()
            prefix = lines.get((name, attributes, ""))
            if prefix is None:
                prefix = self.labels.line_prefix(name, resource, attributes, "")
            series[prefix] = text + "\n"
            stamps[prefix] = batch
            if owners.get(prefix) != identity:
                family.claim(identity, prefix)
            stored += 1
        return stored

    def _ingest_split(
        self,
        store: SeriesStore,
        identity: int,
        resource: AttrItems,
        metric: Metric,
        now: float,
    ) -> int:
        """The slow path for metrics whose family depends on a point attribute (dcgm)."""
        stored = 0
        for point in metric.points:
            t = self.target(metric, point.attributes)
            family = store.family(t.name, t.type, t.help)
            try:
                value = point.value * t.scale if t.scale != 1.0 else point.value
                text = format_value(
                    value if t.convert is None else t.convert(value, point.attributes)
                )
            except (TypeError, ValueError, OverflowError):
                continue
            if family is not None:
                attributes = tuple(point.attributes.items())
                prefix = self.labels.line_prefix(t.name, resource, attributes, t.drop)
                family.touched[identity] = None
                family.write(identity, prefix, text + "\n", store.batch)
                stored += 1
        return stored

    def _plain_target(self, metric: Metric) -> Target:
        """`target(metric, {})`, remembered by name for `_ingest_resource`: a metric's descriptor
        is the same batch after batch, so it compares four fields instead of hashing a key."""
        target = self.target(metric, {})
        self._by_name[metric.name] = (
            metric.kind,
            metric.monotonic,
            metric.unit,
            metric.description,
            target,
        )
        return target

    def target(self, metric: Metric, attributes: Attributes) -> Target:
        """The family a point of `metric` with `attributes` belongs to (cached per metric and,
        for the metrics dcgm-exporter splits, per value of the splitting attribute)."""
        split = catalog.DCGM_SPLIT.get(metric.name) if self._naming == "dcgm" else None
        chooser = attributes.get(split[0]) if split else None
        key = (metric.name, metric.unit, metric.kind, metric.monotonic, metric.description, chooser)
        target = self._targets.get(key)
        if target is None:
            target = self._targets[key] = self._new_target(metric, attributes)
        return target

    def _new_target(self, metric: Metric, attributes: Attributes) -> Target:
        counter = metric.kind is MetricKind.SUM and metric.monotonic
        type_ = "counter" if counter else "gauge"
        if self._naming == "dcgm":
            found = dcgm.field(metric.name, metric.unit, attributes)
            if found is not None:
                return Target(
                    namespaced(self._namespace, found.name),
                    found.type or type_,
                    metric.description,
                    found.scale,
                    found.split_key,
                    found.convert,
                )
        name = metric_name(metric.name, metric.unit, metric.kind, metric.monotonic)
        return Target(namespaced(self._namespace, name), type_, metric.description)


def _is_allocation(rm: ResourceMetrics) -> bool:
    return any(m.name == semconv.GPU_ALLOCATION for m in rm.metrics)


def _holders_by_device(batch: Batch) -> dict[object, list[ResourceMetrics]]:
    """The holders of each shared GPU in `batch`, from its allocation series."""
    found: dict[object, list[ResourceMetrics]] = {}
    for rm in batch:
        if _is_allocation(rm) and rm.resource.get(semconv.GPU_SHARED) is True:
            found.setdefault(rm.resource.get(semconv.HW_ID), []).append(rm)
    return found


def _holder_copy(device: Attributes, holder: ResourceMetrics) -> AttrItems:
    """A shared GPU's resource as one holder's copy: the holder's labels and replica added."""
    extra = {k: v for k, v in holder.resource.items() if k not in device}
    return tuple({**device, **extra}.items())
