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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from otelgpu.exporters.prometheus import dcgm
from otelgpu.exporters.prometheus.labels import AttrItems, LabelRenderer, Naming
from otelgpu.exporters.prometheus.naming import metric_name, namespaced
from otelgpu.exporters.prometheus.replay import (
    Descriptor,
    Plan,
    Settle,
    Step,
    plan_of,
    replay,
    step,
)
from otelgpu.exporters.prometheus.series import Family, SeriesStore, format_point
from otelgpu.pdata import semconv
from otelgpu.pdata.model import (
    Attributes,
    AttrValue,
    Batch,
    Metric,
    MetricKind,
    NumberDataPoint,
    ResourceMetrics,
)
from otelgpu.receivers.nvml import metrics as catalog

SharedGpuSeries = Literal["device", "per_holder"]
PLAN_SWEEP = 64  # batches: plans unused for this long are forgotten


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
        replay: bool = True,
    ) -> None:
        self._naming = naming
        self._replay = replay  # False: the general path only (tests hold the two equal)
        self._namespace = namespace
        self._per_holder = shared_gpu_series == "per_holder"
        self.labels = LabelRenderer(naming, const_labels, dcgm_labels)
        self._targets: dict[tuple[str, str, MetricKind, bool, str, object], Target] = {}
        self._by_name: dict[str, tuple[MetricKind, bool, str, str, Target]] = {}
        self._plans: dict[tuple[AttrValue, ...], Plan] = {}  # by resource shape (`ingest`)
        self._settle = Settle()
        self._descriptors: dict[Descriptor, Descriptor] = {}

    def ingest(self, store: SeriesStore, batch: Batch, now: float) -> tuple[int, int]:
        """Stores every point of `batch` as updated at `now`; (stored, dropped) point counts.

        Each resource's identity then holds exactly the lines this batch wrote for it. A
        resource seen before in the same shape is replayed from its plan (`replay.py`)."""
        stored = dropped = 0
        store.begin(now)
        number = store.batch
        holders = _holders_by_device(batch) if self._per_holder else {}
        plans, settle = self._plans, self._settle
        for rm in batch:
            resource = rm.resource
            items: AttrItems | None = None
            if rm.identity is not None:
                identity = store.key(rm.identity)
                if not rm.metrics:  # the identity is gone: its lines leave at commit
                    store.empty(identity)
                    continue
            else:  # no identity from the receiver: its attributes as they are here are it
                items = tuple(resource.items())
                identity = store.key(items)
            copies = holders.get(resource.get(semconv.HW_ID)) if holders else None
            if copies and not _is_allocation(rm) and semconv.PROCESS_PID not in resource:
                for copy in [_holder_copy(resource, holder) for holder in copies]:
                    ok, points, _ = self._ingest_resource(store, identity, copy, rm.metrics, now)
                    stored += ok
                    dropped += points - ok
                    settle.reported(identity, None, 0)
                continue
            # The plan's key: the attributes as keys then values (equal exactly when the
            # attributes are; a quarter of the memory of the (key, value) pairs).
            shape = (*resource, *resource.values())
            plan = plans.get(shape) if self._replay else None
            if plan is not None and plan.identity == identity:
                split = None
                if plan.split:
                    items = tuple(resource.items()) if items is None else items
                    split = self._splitter(store, identity, items, now)
                done = replay(plan, rm.metrics, number, store.layout, split)
                if done is not None:
                    settle.reported(identity, plan, plan.used)
                    plan.used = number
                    stored += done[0]
                    dropped += done[1] - done[0]
                    continue
            items = tuple(resource.items()) if items is None else items
            ok, points, steps = self._ingest_resource(
                store, identity, items, rm.metrics, now, record=self._replay
            )
            stored += ok
            dropped += points - ok
            settle.reported(identity, None, 0)
            if steps is not None:
                plans[shape] = plan_of(identity, steps, number, store.layout.version)
                # Its lines are in the plan now: the label cache need not hold them too (at 10k
                # series that is ~7 MiB). A change of shape renders the resource's lines again.
                self.labels.forget(items)
        settle.finish(number, store.touched_families)
        store.commit()
        if number % PLAN_SWEEP == 0:
            self._sweep(number)
        return stored, dropped

    def _step(
        self,
        metric: Metric,
        target: Target | None,
        family: Family | None,
        points: tuple[NumberDataPoint, ...],
        prefixes: list[str],
    ) -> Step:
        """One metric of a plan; no target: a split metric (the replay hands it back)."""
        if target is None or family is None:
            return step(self._descriptors, metric, None, points, prefixes, 1.0, None)
        return step(
            self._descriptors, metric, family, points, prefixes, target.scale, target.convert
        )

    def _splitter(
        self, store: SeriesStore, identity: int, resource: AttrItems, now: float
    ) -> Callable[[Metric], int]:
        """The general path of one of dcgm's split metrics, for a replay."""
        return lambda metric: self._ingest_split(store, identity, resource, metric, now)

    def _sweep(self, number: int) -> None:
        """Forgets plans (and what `Settle` knows of identities) unused for `PLAN_SWEEP`
        batches: pods that come and go do not grow them."""
        cutoff = number - PLAN_SWEEP
        self._plans = {k: p for k, p in self._plans.items() if p.used > cutoff}
        live = {p.identity for p in self._plans.values()}
        self._settle.forget(live.__contains__)

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
        record: bool = False,
    ) -> tuple[int, int, tuple[Step, ...] | None]:
        """Every metric of one resource (copy); how many points it stored, of how many, and
        (with `record`) the plan's steps when every point was stored (else None). A metric with
        bad data stores none of its points, and never raises.

        This is the general path: the target remembered by metric name, the family already
        there, `Family.write` inlined."""
        lines = self.labels.lines(resource)  # once per resource, not per metric
        split = catalog.DCGM_SPLIT if self._naming == "dcgm" else {}
        by_name, families, touched = self._by_name, store.families, store.touched_families
        batch = store.batch
        stored = total = 0
        steps: list[Step] | None = [] if record else None
        for metric in metrics:
            points = metric.points
            total += len(points)
            try:
                if metric.name in split:
                    stored += self._ingest_split(store, identity, resource, metric, now)
                    if steps is not None:
                        steps.append(self._step(metric, None, None, (), []))
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
                        steps = None  # the name belongs to a family of another type
                        continue
                prefixes: list[str] | None = [] if steps is not None else None
                written = self._write(
                    family, identity, resource, lines, target, points, batch, prefixes
                )
                stored += written
                if steps is not None and prefixes is not None and written == len(points):
                    steps.append(self._step(metric, target, family, points, prefixes))
                else:
                    steps = None
            except (TypeError, ValueError, AttributeError):
                steps = None
                continue  # bad data: counted as dropped, never raised into the pipeline
        return stored, total, (tuple(steps) if steps is not None else None)

    def _write(
        self,
        family: Family,
        identity: int,
        resource: AttrItems,
        lines: dict[tuple[str, AttrItems, str], str],
        target: Target,
        points: tuple[NumberDataPoint, ...],
        batch: int,
        record: list[str] | None = None,
    ) -> int:
        """`Family.write` of each point, inlined; how many points were numbers. With `record`,
        the prefix of every point stored is appended to it."""
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
                    text = format_point(value, point.attributes, scale, convert)
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
            if record is not None:
                record.append(prefix)
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
                text = format_point(point.value, point.attributes, t.scale, t.convert)
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
