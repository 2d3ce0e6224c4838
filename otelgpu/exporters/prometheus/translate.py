"""Batches → series in the store, in `otel` or `dcgm` naming.

Resource attributes become labels on every series of that resource (a GPU's `hw.id`,
`k8s.pod.name`, ... are what users filter and join on, and the agent's resources are few and
small), instead of the spec's separate `target_info` series that every query would have to join;
only a device's static facts are on one info series per device (`device_info.py`).

Every series is written on behalf of its resource's identity (see `series.py`), so one GPU is one
series per metric whatever its labels did. A resource seen before in the same shape is replayed
from its plan (`replay.py`); any other goes through the general path (`general.py`), which
records the plan. `shared_gpu_series: per_holder` opts into dcgm-exporter's
`--kubernetes-virtual-gpus` shape instead (`holders.py`): a shared GPU's utilization and memory
keep their device-level series and each holder (from the `nvidia.gpu.allocation` series
k8s_attributes sends) gets its own from its processes' readings; its other series are copied
once per holder, with the holder's labels and its replica ID, and sums over those copies count
the GPU once per holder. `naming: dcgm` serves dcgm-exporter's device set: a resource its
receiver notes as left out of it (`notes.DCGM_LEFT_OUT`, e.g. a GPU its MIG instances stand
for) writes no series, and an instance standing for its GPU also carries the readings of the
GPU's resource in the same batch that the receiver names on it (`notes.DCGM_FROM_GPU`), as
dcgm-exporter serves them on each instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

from otelgpu.exporters.prometheus import dcgm, device_info
from otelgpu.exporters.prometheus.general import GeneralPath
from otelgpu.exporters.prometheus.holders import (
    Write,
    exclusive_claims,
    holder_writes,
    holders_by_device,
    is_allocation,
    process_sums,
)
from otelgpu.exporters.prometheus.labels import AttrItems, LabelRenderer, Naming
from otelgpu.exporters.prometheus.naming import namespaced
from otelgpu.exporters.prometheus.replay import Descriptor, Plan, Recorder, Settle, replay
from otelgpu.exporters.prometheus.series import Family, SeriesStore
from otelgpu.exporters.prometheus.targets import Targets
from otelgpu.exporters.prometheus.value_text import Target
from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import (
    Attributes,
    AttrValue,
    Batch,
    Metric,
    ResourceMetrics,
)
from otelgpu.pdata.naming import NO_NAMES, NamingTable

SharedGpuSeries = Literal["device", "per_holder"]
PLAN_SWEEP = 64  # batches: plans unused for this long are forgotten


class Translator:
    """Turns batches into store updates; remembers names, label sets and plans it built.

    `names`: what the receivers call their metrics in dcgm-exporter's terms (`naming: dcgm`
    renders them; see `otelgpu.pdata.naming`). `dcgm_labels`: dcgm-exporter's label per
    attribute (`dcgm.label_names`); the receivers' point labels are added to it. `dra_labels`
    (dcgm naming only): a device one holder has whole through a DRA claim carries the claim
    (`holders.exclusive_claims`), as dcgm-exporter's `--kubernetes-enable-dra` labels it."""

    def __init__(
        self,
        naming: Naming,
        const_labels: Mapping[str, str],
        shared_gpu_series: SharedGpuSeries = "device",
        dcgm_labels: Mapping[str, str] | None = None,
        namespace: str = "",
        replay: bool = True,
        names: NamingTable = NO_NAMES,
        dra_labels: bool = False,
        info_series: bool = True,
    ) -> None:
        self._replay = replay  # False: the general path only (tests hold the two equal)
        # dcgm naming's `dcgm_labels.dra`: a device held whole through a DRA claim carries it
        self._dra = dra_labels and naming == "dcgm"
        self._dcgm = naming == "dcgm"
        self._per_holder = shared_gpu_series == "per_holder"
        self._info_series = info_series  # False: another exporter serves the info series
        labels = {**names.dcgm_labels, **(dcgm.LABELS if dcgm_labels is None else dcgm_labels)}
        self.labels = LabelRenderer(naming, const_labels, labels)
        self._targets = Targets(naming, namespace, names)
        self._general = GeneralPath(
            self._targets, self.labels, namespaced(namespace, device_info.INFO_NAME)
        )
        self._plans: dict[tuple[AttrValue, ...], Plan] = {}  # by resource shape (`ingest`)
        self._settle = Settle()
        self._descriptors: dict[Descriptor, Descriptor] = {}

    def ingest(self, store: SeriesStore, batch: Batch, now: float) -> tuple[int, int]:
        """Stores every point of `batch` as updated at `now`; (stored, dropped) point counts.

        Each resource's identity then holds exactly the lines this batch wrote for it."""
        stored = dropped = 0
        store.begin(now)
        number = store.batch
        holders = holders_by_device(batch) if self._per_holder else {}
        sums = process_sums(batch, holders) if holders else {}
        claims = exclusive_claims(batch) if self._dra else {}
        plans, settle, general = self._plans, self._settle, self._general
        left_out = _left_out(batch) if self._dcgm else {}
        for rm in batch:
            noted = rm.notes
            if self._dcgm and noted:
                if noted.get(notes.DCGM_LEFT_OUT):
                    # not in dcgm-exporter's device set: only otelgpu's own health stays
                    rm = replace(rm, metrics=_health_only(rm))
                    if not rm.metrics:
                        continue
                elif rm.metrics and notes.DCGM_FROM_GPU in noted:
                    rm = _with_gpu_readings(rm, left_out)  # a MIG instance in its GPU's place
            resource = rm.resource
            items: AttrItems | None = None
            device = resource.get(semconv.HW_ID)
            if (
                claims
                and device in claims
                and not is_allocation(rm)
                and semconv.PROCESS_PID not in resource
            ):
                resource = {**resource, **claims[device]}  # part of the plan's shape too
            copies = holders.get(device) if holders else None
            shape: tuple[AttrValue, ...] | None = None
            writes: list[Write]
            if copies and not is_allocation(rm) and semconv.PROCESS_PID not in resource:
                # dcgm-exporter's per-holder shape of a shared GPU: the general path, no plan
                writes = holder_writes(rm, copies, sums.get(device))
            else:
                # The plan's key: the attributes as keys then values (equal exactly when the
                # attributes are; a quarter of the memory of the (key, value) pairs).
                shape = (*resource, *resource.values())
            if rm.identity is not None:
                identity = store.identities.key(rm.identity)
                if not rm.metrics:  # the identity is gone: its lines leave at commit
                    store.empty(identity)
                    continue
            else:  # no identity from the receiver: its attributes as they are here are it
                attributes = shape if shape is not None else (*resource, *resource.values())
                identity = store.identities.key(attributes)
            if shape is not None:
                plan = plans.get(shape) if self._replay else None
                if plan is not None and plan.identity == identity:
                    split_path = None
                    if plan.splits:
                        items = tuple(resource.items()) if items is None else items
                        split_path = _Split(general, store, identity, items)
                    done = replay(plan, rm.metrics, store, settle, split_path)
                    if done is not None:
                        stored += done[0]
                        dropped += done[1] - done[0]
                        continue
                items = tuple(resource.items()) if items is None else items
                info = self._info_series and device_info.writes_info(resource, is_allocation(rm))
                writes = [(items, info, rm.metrics)]
            for written, info, metrics in writes:
                planned = shape is not None and self._replay
                record = Recorder(self._descriptors) if planned else None
                ok, points, complete = general.write_resource(
                    store, identity, written, metrics, record, info
                )
                stored += ok
                dropped += points - ok
                settle.reported(identity, None, 0)
                if shape is not None and record is not None and complete:
                    plans[shape] = record.plan(identity, number, store.losses(identity))
                    # Its lines are in the plan now: the label cache need not hold them too
                    # (at 10k series that is ~7 MiB). A change of shape renders them again.
                    self.labels.forget(written)
        settle.finish(number)
        store.commit()
        if number % PLAN_SWEEP == 0:
            self._sweep(number)
        return stored, dropped

    def target(self, metric: Metric, attributes: Attributes) -> Target:
        """The family a point of `metric` with `attributes` belongs to."""
        if self._targets.is_split(metric):
            return self._targets.of_point(metric, attributes)
        return self._targets.of(metric)

    def families(self, rm: ResourceMetrics, now: float) -> list[Family]:
        """Families for the agent's self-telemetry: datapoint labels and const labels only (the
        agent's resource is the same on every series and says nothing the target labels don't)."""
        store = SeriesStore()
        self._general.write_resource(store, 0, (), rm.metrics)  # bad points: left out
        return list(store.families.values())

    def _sweep(self, number: int) -> None:
        """Forgets plans (and what `Settle` knows of identities) unused for `PLAN_SWEEP`
        batches: pods that come and go do not grow them."""
        cutoff = number - PLAN_SWEEP
        self._plans = {k: p for k, p in self._plans.items() if p.used > cutoff}
        live = {p.identity for p in self._plans.values()}
        self._settle.forget(live.__contains__)


def _left_out(batch: Batch) -> dict[object, ResourceMetrics]:
    """The resources of `batch` dcgm naming leaves out, by identity (`notes.DCGM_LEFT_OUT`)."""
    return {rm.identity: rm for rm in batch if rm.notes and rm.notes.get(notes.DCGM_LEFT_OUT)}


# otelgpu's own health families. dcgm-exporter has no field for them, so its device set (which
# leaves a MIG GPU out in favour of its instances) does not govern them: a MIG GPU's health
# reasons (XIDs, row remapping, slowdowns) are the GPU's alone, and its instances do not repeat
# them. The GPU's info series comes with them.
_KEPT_WHEN_LEFT_OUT = frozenset({"nvidia.gpu.up", "hw.status"})


def _health_only(rm: ResourceMetrics) -> tuple[Metric, ...]:
    return tuple(m for m in rm.metrics if m.name in _KEPT_WHEN_LEFT_OUT)


def _with_gpu_readings(
    rm: ResourceMetrics, left_out: Mapping[object, ResourceMetrics]
) -> ResourceMetrics:
    """A MIG instance with the readings of its GPU it carries in dcgm naming
    (`notes.DCGM_FROM_GPU`), taken from the GPU's resource in the same batch."""
    noted = rm.notes.get(notes.DCGM_FROM_GPU) if rm.notes else None
    if not isinstance(noted, tuple) or len(noted) != 2:
        return rm
    gpu = left_out.get(noted[0])
    if gpu is None:
        return rm
    names = noted[1]
    return replace(rm, metrics=rm.metrics + tuple(m for m in gpu.metrics if m.name in names))


class _Split:
    """The general path of a split metric of one resource (what a replay hands them to)."""

    __slots__ = ("_general", "_identity", "_resource", "_store")

    def __init__(
        self, general: GeneralPath, store: SeriesStore, identity: int, resource: AttrItems
    ) -> None:
        self._general, self._store = general, store
        self._identity, self._resource = identity, resource

    def __call__(self, metric: Metric) -> int:
        return self._general.write_split(self._store, self._identity, self._resource, metric)
