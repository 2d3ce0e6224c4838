"""What must hold of every /metrics body (both namings) and every OTLP request, against the
node model's truths.

Each output is first read into `Seen` series, one shape for the three views, then judged:

1. `one_series_per_identity`: a metric holds one series per identity (device or MIG instance,
   process, the receiver's own attributes; for `nvidia.gpu.allocation` the holder too).
2. `allocations_name_the_holders`: a device's allocation shares sum to 1 and name exactly the
   holders of one truth the kubelet's snapshot may still show.
3. `labels_are_true`: every (device, pod, business label) was true at a moment the
   pipeline may still be showing; labels may be missing while it catches up, never wrong.
4. `chargeback_adds_up`: power x allocation, summed over holders, is the allocated GPUs' power.
5. `nothing_gone_is_shown`: no series of a deleted pod or an ended process;
   `lost_gpus_say_only_so`: none of a lost GPU (its MIG instances and processes) but its up
   and status, its XID series (the evidence) and the allocation series of the pods the kubelet
   still says hold it.
7. `Downstream.lingering` (OTLP only): what a backend keeping point attributes as labels serves
   after the request (a point flagged "no recorded value" ends its series there) is exactly what
   the request reported: no series of a holder, process, health state or device that ended
   goes on downstream on its last value.
6. `caught_up_labels_are_present`: once the sources are up and nothing changed for one
   refresh interval, every holder's pod labels are there, and after two its business labels
   too: a new holder is known from the kubelet's next answer (within one interval), and its
   business labels from the runtime's first listing that began after that (within one more:
   an older listing may still hold a deleted pod's container under the same name). A pod
   recreated under its name gets its business labels only once what the kubelet lists for it
   changed after the runtime first listed it (`NodeModel.labels_pending`): the kubelet names
   pods, not pod uids, and an unchanged listing may still mean the old pod.

"May still be showing" is `NodeModel.window`: the truths current within one refresh interval
(`lag`), and during a source's outage (and `lag` after it) every truth since it went down.
Each check raises `AssertionError` from its own line, so hypothesis tells the failures apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from tests.unit.property.node_model import (
    DEVICES,
    GPU_UUIDS,
    MIG_PARENTS,
    Holder,
    NodeModel,
    Truth,
)

ALLOCATION = "allocation"
POWER = "power"
HEALTH = "health"  # nvidia.gpu.up and hw.status: what a lost GPU still reports
INFO = "info"  # hw_gpu_info: a device's static facts, no holder; a lost GPU keeps it
XID = "xid"
OTHER = "other"

_UUID_GPU: Mapping[str, int] = {
    **{uuid: i for i, uuid in enumerate(GPU_UUIDS)},
    **{d.uuid: d.gpu for d in DEVICES},
}
_MIG_PARENT_UUIDS = frozenset(GPU_UUIDS[i] for i in MIG_PARENTS)
# (GPU UUID, GPU instance id) -> the MIG instance's UUID (GPU instance N is MIG slot N-1)
_MIG_BY_INSTANCE: Mapping[tuple[str, str], str] = {
    (GPU_UUIDS[d.gpu], str(d.mig_slot + 1)): d.uuid for d in DEVICES if d.mig_slot >= 0
}


@dataclass(frozen=True, slots=True)
class Naming:
    """Where one view puts what the checks read."""

    view: str
    device: tuple[str, ...]  # the device's UUID: the first of these labels present
    pid: str
    pod: str
    namespace: str
    container: str
    team: str
    app: str
    shared: str
    kinds: Mapping[str, str]  # metric name → ALLOCATION, POWER, HEALTH, INFO, XID
    added: frozenset[str]  # labels processors add (not part of a series' identity)
    instance: str = ""  # the GPU-instance label naming a MIG instance on its GPU's UUID


OTEL = Naming(
    view="prometheus otel",
    device=("hw_id",),
    pid="process_pid",
    pod="k8s_pod_name",
    namespace="k8s_namespace_name",
    container="k8s_container_name",
    team="container_env_TEAM",
    app="k8s_pod_label_app",
    shared="nvidia_gpu_shared",
    kinds={
        "nvidia_gpu_allocation_ratio": ALLOCATION,
        "hw_power_watts": POWER,
        "nvidia_gpu_up": HEALTH,
        "hw_status": HEALTH,
        "hw_gpu_info": INFO,
        "nvidia_gpu_xid_errors_total": XID,
    },
    added=frozenset(
        {
            "k8s_pod_name",
            "k8s_namespace_name",
            "k8s_container_name",
            "k8s_node_name",
            "container_env_TEAM",
            "k8s_pod_label_app",
            "nvidia_gpu_shared",
            "nvidia_gpu_holders",
            "nvidia_gpu_replica",
            "nvidia_gpu_allocation_source",
            "nvidia_gpu_resourceclaim_name",
            "nvidia_gpu_resourceclaim_namespace",
        }
    ),
)
DCGM = Naming(
    view="prometheus dcgm",
    device=("UUID",),  # a MIG instance's series: its GPU's UUID and its GPU_I_ID
    pid="process_pid",
    pod="pod",
    namespace="namespace",
    container="container",
    team="env_TEAM",
    app="app",
    shared="nvidia_gpu_shared",
    kinds={
        "nvidia_gpu_allocation_ratio": ALLOCATION,
        "DCGM_FI_DEV_POWER_USAGE": POWER,
        "nvidia_gpu_up": HEALTH,
        "hw_status": HEALTH,
        "hw_gpu_info": INFO,
        "DCGM_FI_DEV_XID_ERRORS": XID,
    },
    added=frozenset(
        {
            "pod",
            "namespace",
            "container",
            "k8s_node_name",
            "env_TEAM",
            "app",
            "nvidia_gpu_shared",
            "nvidia_gpu_holders",
            "vgpu",
            "nvidia_gpu_allocation_source",
            "dra_claim_name",
            "dra_claim_namespace",
        }
    ),
    instance="GPU_I_ID",
)
OTLP = Naming(
    view="otlp",
    device=("hw.id",),
    pid="process.pid",
    pod="k8s.pod.name",
    namespace="k8s.namespace.name",
    container="k8s.container.name",
    team="container.env.TEAM",
    app="k8s.pod.label.app",
    shared="nvidia.gpu.shared",
    kinds={
        "nvidia.gpu.allocation": ALLOCATION,
        "hw.power": POWER,
        "nvidia.gpu.up": HEALTH,
        "hw.status": HEALTH,
        "nvidia.gpu.xid.errors": XID,
    },
    added=frozenset(
        {
            "k8s.pod.name",
            "k8s.namespace.name",
            "k8s.container.name",
            "k8s.node.name",
            "container.env.TEAM",
            "k8s.pod.label.app",
            "nvidia.gpu.shared",
            "nvidia.gpu.holders",
            "nvidia.gpu.replica",
            "nvidia.gpu.allocation.source",
            "nvidia.gpu.resourceclaim.name",
            "nvidia.gpu.resourceclaim.namespace",
        }
    ),
)


@dataclass(frozen=True, slots=True)
class Seen:
    """One series of one view, reduced to what the checks read."""

    view: str
    metric: str
    kind: str
    device: str  # hw.id: a GPU or MIG UUID ("" for none)
    pid: int | None
    holder: Holder | None  # None: no pod labels
    partial: bool  # some pod labels but not all three
    team: str | None
    app: str | None
    shared: bool
    value: float
    identity: tuple[object, ...]
    line: str  # for messages

    @property
    def gpu(self) -> int | None:
        return _UUID_GPU.get(self.device)


def _seen(naming: Naming, metric: str, labels: Mapping[str, str], value: float, line: str) -> Seen:
    device = next((labels[k] for k in naming.device if k in labels), "")
    if naming.instance and naming.instance in labels:
        device = _MIG_BY_INSTANCE.get((device, labels[naming.instance]), device)
    pid = labels.get(naming.pid)
    names = (labels.get(naming.namespace), labels.get(naming.pod), labels.get(naming.container))
    holder = None if None in names else (str(names[0]), str(names[1]), str(names[2]))
    kind = naming.kinds.get(metric, OTHER)
    own = tuple(sorted((k, v) for k, v in labels.items() if k not in naming.added))
    identity: tuple[object, ...] = (metric, own, holder if kind == ALLOCATION else None)
    return Seen(
        view=naming.view,
        metric=metric,
        kind=kind,
        device=device,
        pid=int(pid) if pid is not None else None,
        holder=holder,
        partial=holder is None and any(n is not None for n in names),
        team=labels.get(naming.team),
        app=labels.get(naming.app),
        shared=str(labels.get(naming.shared, "")).lower() == "true",
        value=value,
        identity=identity,
        line=line,
    )


_LINE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def read_prometheus(text: str, naming: Naming) -> list[Seen]:
    """The series of a classic-text body."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        assert match is not None, f"{naming.view}: unreadable line {line!r}"
        labels = dict(_LABEL.findall(match["labels"] or ""))
        out.append(_seen(naming, match["name"], labels, float(match["value"]), line))
    return out


NO_RECORDED_VALUE = 1  # DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK


def read_otlp(request: ExportMetricsServiceRequest) -> list[Seen]:
    """The data points of an OTLP request, each with its resource's attributes (a point that
    closes a series, flagged "no recorded value", reports nothing and is left out).

    A point's identity is its metric, its device (`hw.id`), the holder for allocation
    points, and its own point attributes: a backend that does not keep every resource
    attribute as a label (Prometheus' OTLP ingestion, the Collector's prometheus exporter
    without resource_to_telemetry_conversion) tells series apart by exactly these."""
    out = []
    for rm, metric, point in _otlp_points(request):
        if point.flags & NO_RECORDED_VALUE:
            continue
        resource = {kv.key: _any(kv.value) for kv in rm.resource.attributes}
        attrs = {kv.key: _any(kv.value) for kv in point.attributes}
        labels = {**resource, **attrs}
        value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
        seen = _seen(OTLP, metric.name, labels, float(value), f"{metric.name} {labels}")
        own = tuple(sorted((k, v) for k, v in attrs.items() if k not in OTLP.added))
        identity = (
            metric.name,
            resource.get("hw.id"),
            own,
            seen.holder if seen.kind == ALLOCATION else None,
        )
        out.append(replace(seen, identity=identity))
    return out


class Downstream:
    """The series a backend that keeps only point attributes as labels (Prometheus' OTLP
    endpoint by default) holds live from one exporter's requests: a point starts or renews its
    series, a point flagged "no recorded value" ends it."""

    def __init__(self) -> None:
        self.live: set[tuple[str, frozenset[tuple[str, str]]]] = set()

    def lingering(self, request: ExportMetricsServiceRequest) -> list[str]:
        """Takes `request`; the live series it neither renewed nor ended (none when it is
        empty: no cycle was sent)."""
        renewed = set()
        for _, metric, point in _otlp_points(request):
            key = (metric.name, frozenset((kv.key, _any(kv.value)) for kv in point.attributes))
            if point.flags & NO_RECORDED_VALUE:
                assert key not in renewed, f"[7 downstream] ended and renewed: {key}"
                self.live.discard(key)
            else:
                renewed.add(key)
                self.live.add(key)
        if not request.resource_metrics:
            return []
        return sorted(f"{name} {dict(sorted(attrs))}" for name, attrs in self.live - renewed)


def _otlp_points(request: ExportMetricsServiceRequest) -> Iterator[tuple[Any, Any, Any]]:
    """(resource metrics, metric, data point) of every point of an OTLP request."""
    for rm in request.resource_metrics:
        for scope in rm.scope_metrics:
            for metric in scope.metrics:
                data = metric.WhichOneof("data")
                for point in getattr(metric, data).data_points if data else ():
                    yield rm, metric, point


def _any(value: object) -> str:
    field = value.WhichOneof("value")  # type: ignore[attr-defined]
    return (
        str(getattr(value, field)).lower() if field == "bool_value" else str(getattr(value, field))
    )


# --- the invariants ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Windows:
    """The truths each view may still show: the kubelet's (`pods`), the runtime's, both, and
    the present; `settled` when the present alone is left and every source is up."""

    pods: list[Truth]
    runtime: list[Truth]
    both: list[Truth]
    now: Truth
    settled: bool
    labels_settled: bool = False  # settled for two refresh intervals: business labels too
    pending: frozenset[str] = frozenset()  # containers whose business labels may wait longer

    @staticmethod
    def of(model: NodeModel, now: float, lag: float, catch_up: float | None = None) -> Windows:
        """The windows at `now`; `catch_up` (default `lag`) is how long the present must have
        held before labels must be there."""
        pods = model.window(model.kubelet_outages, now, lag)
        runtime = model.window(model.runtime_outages, now, lag)
        both = model.window([*model.kubelet_outages, *model.runtime_outages], now, lag)
        outages = [*model.kubelet_outages, *model.runtime_outages]
        catch_up = lag if catch_up is None else catch_up
        settled = model.settled(outages, now, catch_up)
        labels_settled = model.settled(outages, now, 2 * catch_up)
        pending = model.labels_pending()
        return Windows(pods, runtime, both, model.truth(), settled, labels_settled, pending)


def check_all(series: list[Seen], windows: Windows, ignore: Iterable[str] = ()) -> None:
    """Every invariant on one view's series (`ignore`: names of invariants not checked)."""
    skip = set(ignore)
    for name, check in CHECKS:
        if name not in skip:
            check(series, windows)


def one_series_per_identity(series: list[Seen], w: Windows) -> None:
    first: dict[tuple[object, ...], Seen] = {}
    for s in series:
        other = first.setdefault(s.identity, s)
        assert other is s, (
            f"[1 identity] {s.view}: two series for one identity:\n  {other.line}\n  {s.line}"
        )


def allocations_name_the_holders(series: list[Seen], w: Windows) -> None:
    shares: dict[str, list[Seen]] = {}
    for s in series:
        if s.kind == ALLOCATION:
            assert s.holder is not None, (
                f"[2 allocation] {s.view}: an allocation with no holder: {s.line}"
            )
            shares.setdefault(s.device, []).append(s)
    for uuid, found in shares.items():
        total = sum(s.value for s in found)
        assert math.isclose(total, 1.0, abs_tol=1e-9), (
            f"[2 allocation] {found[0].view}: shares of {uuid} sum to {total}: "
            + "; ".join(f"{s.holder}={s.value}" for s in found)
        )
        named = frozenset(s.holder for s in found if s.holder is not None)
        truths = [t.holders_of(uuid) for t in w.pods]
        assert named in truths, (
            f"[2 allocation] {found[0].view}: {uuid} allocated to {sorted(named)}; the holders "
            f"the kubelet may still show: {[sorted(t) for t in truths]}"
        )
    if w.settled:
        for device in DEVICES:
            if device.gpu in w.now.lost:
                continue
            held = w.now.holders_of(device.uuid)
            named = frozenset(s.holder for s in shares.get(device.uuid, []) if s.holder)
            assert named == held, (
                f"[2 allocation settled] {device.uuid} ({device.key}) allocated to {sorted(named)} "
                f"though the sources are up and the node unchanged for a refresh: holders {sorted(held)}"
            )


def labels_are_true(series: list[Seen], w: Windows) -> None:
    for s in series:
        assert not s.partial, f"[3 labels] {s.view}: some pod labels but not all: {s.line}"
        if s.kind == INFO:
            assert s.holder is None and s.team is None and s.app is None, (
                f"[3 labels] {s.view}: a device's info series carries holder labels: {s.line}"
            )
            continue
        if s.pid is not None:
            _process_labels_true(s, w)
            continue
        if s.holder is not None and s.kind != ALLOCATION:
            assert s.device not in _MIG_PARENT_UUIDS, (
                f"[3 labels] {s.view}: a MIG-enabled GPU carries a holder: {s.line}"
            )
            ok = any(t.holders_of(s.device) == {s.holder} for t in w.pods)
            assert ok, (
                f"[3 labels] {s.view}: {s.device} labelled {s.holder}, never its only holder "
                f"within the window: {s.line}"
            )
        if s.shared:
            assert any(len(t.holders_of(s.device)) > 1 for t in w.pods), (
                f"[3 labels] {s.view}: {s.device} marked shared, never shared in the window: {s.line}"
            )
        if s.team is None and s.app is None:
            continue
        assert s.holder is not None, (
            f"[3 labels] {s.view}: business labels without a holder: {s.line}"
        )
        cids = {
            i.cid
            for t in w.both
            for i in t.instances.values()
            if i.holder == s.holder
            and i.cid in t.visible
            and (s.team is None or i.team == s.team)
            and (s.app is None or i.app == s.app)
        }
        held = any((s.device, cid) in t.held_by for t in w.both for cid in cids)
        assert held, (
            f"[3 labels] {s.view}: TEAM={s.team} app={s.app} on {s.device} for {s.holder}: no "
            f"instance of {s.holder} with these labels held {s.device} within the window: {s.line}"
        )


def _process_labels_true(s: Seen, w: Windows) -> None:
    process = w.now.processes.get(s.pid) if s.pid is not None else None
    if process is None:
        return  # invariant 5 says it
    instances = [t.instances.get(process.cid) for t in w.both]
    mine = [i for i in instances if i is not None]
    if s.holder is not None:
        assert process.cid and any(i.holder == s.holder for i in mine), (
            f"[3 labels] {s.view}: process {s.pid} (container {process.cid[-6:] or 'none: the host'}) "
            f"labelled {s.holder}: {s.line}"
        )
    if s.team is not None or s.app is not None:
        assert any(
            (s.team is None or i.team == s.team) and (s.app is None or i.app == s.app) for i in mine
        ), f"[3 labels] {s.view}: process {s.pid} carries another container's labels: {s.line}"


def chargeback_adds_up(series: list[Seen], w: Windows) -> None:
    power: dict[str, list[Seen]] = {}
    for s in series:
        if s.kind == POWER and s.pid is None:
            power.setdefault(s.device, []).append(s)
    billed = 0.0
    devices: set[str] = set()
    for s in series:
        if s.kind != ALLOCATION or s.device not in power:
            continue
        found = power[s.device]
        assert len(found) == 1, (
            f"[4 chargeback] {s.view}: the join on {s.device} matches {len(found)} power series: "
            + "; ".join(p.line for p in found)
        )
        billed += s.value * found[0].value
        devices.add(s.device)
    total = sum(power[d][0].value for d in devices)
    assert math.isclose(billed, total, rel_tol=1e-9, abs_tol=1e-6), (
        f"[4 chargeback] {series[0].view if series else ''}: holders are billed {billed} W of "
        f"the {total} W their GPUs draw"
    )


def nothing_gone_is_shown(series: list[Seen], w: Windows) -> None:
    live_pods = {pod for t in w.pods for pod in t.pods} | {pod for t in w.runtime for pod in t.pods}
    for s in series:
        if s.holder is not None:
            assert (s.holder[0], s.holder[1]) in live_pods, (
                f"[5 gone] {s.view}: a series of pod {s.holder[1]}, deleted before the window: {s.line}"
            )
        if s.pid is not None:
            assert s.pid in w.now.processes, f"[5 gone] {s.view}: ended process {s.pid}: {s.line}"


def lost_gpus_say_only_so(series: list[Seen], w: Windows) -> None:
    for s in series:
        if s.gpu is not None and s.gpu in w.now.lost:
            # Up and status say it is lost; its holders still hold it (chargeback: no power);
            # its XID series are the evidence of what happened to it.
            assert s.kind in (HEALTH, INFO, ALLOCATION, XID), (
                f"[5 gone] {s.view}: {s.metric} of lost GPU {s.gpu} (only up, status, info, "
                f"XIDs and allocations stay): {s.line}"
            )


def caught_up_labels_are_present(series: list[Seen], w: Windows) -> None:
    if not w.settled:
        return
    for s in series:
        if s.kind in (ALLOCATION, INFO) or s.device == "":
            continue
        if s.gpu is not None and s.gpu in w.now.lost:
            continue
        if s.pid is not None:
            process = w.now.processes.get(s.pid)
            instance = w.now.instances.get(process.cid) if process else None
            if instance is None or instance.cid not in w.now.visible or not w.labels_settled:
                continue
            assert s.holder == instance.holder and s.team == instance.team, (
                f"[6 caught up] {s.view}: process {s.pid} of {instance.holder} TEAM={instance.team} "
                f"shows holder {s.holder} TEAM={s.team}: {s.line}"
            )
            continue
        held = w.now.holders_of(s.device)
        if len(held) != 1 or s.device in _MIG_PARENT_UUIDS:
            continue
        (holder,) = held
        assert s.holder == holder, (
            f"[6 caught up] {s.view}: {s.device} held by {holder} shows holder {s.holder}: {s.line}"
        )
        instance = next(
            (
                i
                for i in w.now.instances.values()
                if i.holder == holder and (s.device, i.cid) in w.now.held_by
            ),
            None,
        )
        if instance is None or instance.cid in w.pending:
            continue
        if instance.cid in w.now.visible and w.labels_settled:
            assert (s.team, s.app) == (instance.team, instance.app), (
                f"[6 caught up] {s.view}: {s.device} held by {holder} (TEAM={instance.team}, "
                f"app={instance.app}) shows TEAM={s.team} app={s.app}: {s.line}"
            )


CHECKS = (
    ("identity", one_series_per_identity),
    ("allocation", allocations_name_the_holders),
    ("labels", labels_are_true),
    ("chargeback", chargeback_adds_up),
    ("gone", nothing_gone_is_shown),
    ("lost_gpu", lost_gpus_say_only_so),
    ("caught_up", caught_up_labels_are_present),
)
