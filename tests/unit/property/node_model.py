"""The truth of one GPU node, kept by hand: what the state machine's rules change and what the
pipeline's output is judged against.

The node has a fixed topology (`DEVICES`): two whole GPUs and one MIG-enabled GPU with two
instances. Pods hold devices through the device plugin (a GPU or MIG UUID, or a time-sliced
replica `<uuid>::<n>`) or through DRA claims (`gpu-<minor>`, `gpu-<minor>-mig-...`, shared
when the claim device has a share ID). Containers run GPU processes; GPUs can be lost; the
kubelet's pod-resources API and the container runtime can be down.

`NodeModel.truth()` is a frozen `Truth`: who holds each device and which business labels each
container instance truly has. The model keeps every truth it had with the fake-clock interval
it was current, so a check can ask "was this true at some moment the pipeline may still be
showing?" (`NodeModel.window`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

NAMESPACE = "team-ns"
TEAMS = ("red", "blue", "green")  # values of the `TEAM` env var (container_env env include)
APPS = ("train", "serve")  # values of the pod label `app` (container_env pod_labels include)

Holder = tuple[str, str, str]  # (namespace, pod, container)


@dataclass(frozen=True, slots=True)
class Device:
    """One allocatable unit: a whole GPU or a MIG instance, as NVML and the kubelet name it."""

    key: str  # the model's name: g0, g1, m2a, m2b
    gpu: int  # the physical GPU's NVML index (and minor number)
    uuid: str  # hw.id
    resource_name: str  # the device plugin's extended resource
    dra_name: str  # the DRA driver's device name
    mig_slot: int = -1  # -1: a whole GPU


def _gpu_uuid(index: int) -> str:
    return f"GPU-0a0b0c0d-0000-4000-8000-{index:012x}"


def _mig_uuid(index: int, slot: int) -> str:
    return f"MIG-0a0b0c0d-{index:04x}-4000-8000-{slot:012x}"


DEVICES: tuple[Device, ...] = (
    Device("g0", 0, _gpu_uuid(0), "nvidia.com/gpu", "gpu-0"),
    Device("g1", 1, _gpu_uuid(1), "nvidia.com/gpu", "gpu-1"),
    Device("m2a", 2, _mig_uuid(2, 0), "nvidia.com/mig-1g.10gb", "gpu-2-mig-1g10gb-19-0", 0),
    Device("m2b", 2, _mig_uuid(2, 1), "nvidia.com/mig-1g.10gb", "gpu-2-mig-1g10gb-19-1", 1),
)
BY_KEY: Mapping[str, Device] = {d.key: d for d in DEVICES}
GPU_COUNT = 3
GPU_UUIDS: tuple[str, ...] = tuple(_gpu_uuid(i) for i in range(GPU_COUNT))
MIG_PARENTS = frozenset({2})  # GPUs whose instances are the allocatable devices
# Devices the simulated backend can run processes on: a GPU's processes show in its first MIG
# instance only (SimulatedNvml.compute_processes), so m2b never has any.
PROCESS_DEVICES = ("g0", "g1", "m2a")

# How a container is given a device: the device plugin's own UUID (exclusive), a time-sliced or
# MPS replica (`::<n>`, shared), a DRA claim device (exclusive) or a shared DRA claim device.
EXCLUSIVE_FORMS = ("uuid", "dra")
SHARED_FORMS = ("replica", "dra_share")
FORMS = EXCLUSIVE_FORMS + SHARED_FORMS


@dataclass(frozen=True, slots=True)
class Grant:
    """One device given to one container, and how (`form`; `tag` is the replica or share ID)."""

    device: str
    form: str
    tag: str = ""


@dataclass(frozen=True, slots=True)
class Container:
    """One container instance. `cid` is new for every instance (a recreated pod's containers
    have new IDs); `team` is its env `TEAM`."""

    name: str
    cid: str
    team: str
    grants: tuple[Grant, ...] = ()


@dataclass(frozen=True, slots=True)
class Pod:
    """One pod instance (a recreated pod under the same name is a new instance: new uid,
    sandbox and container IDs). `in_runtime`: whether the runtime lists its records yet."""

    name: str
    uid: str
    sandbox: str
    app: str
    containers: tuple[Container, ...]
    in_runtime: bool = True
    namespace: str = NAMESPACE
    # when the runtime first listed its records (None: not yet), and whether an earlier pod
    # instance had its name
    visible_at: float | None = None
    successor: bool = False


@dataclass(frozen=True, slots=True)
class Process:
    """A GPU process: its device and the container it runs in ("" for a host process)."""

    pid: int
    device: str
    cid: str


@dataclass(frozen=True, slots=True)
class Instance:
    """What a container instance truly carries: its names and its business labels."""

    holder: Holder
    cid: str
    team: str
    app: str


@dataclass(frozen=True, slots=True)
class Truth:
    """The node at one moment, as the checks need it."""

    holders: Mapping[str, frozenset[Holder]]  # device key → holders (none: absent)
    instances: Mapping[str, Instance]  # cid → instance, every live container
    held_by: frozenset[tuple[str, str]]  # (device uuid, cid) for every grant
    processes: Mapping[int, Process]
    lost: frozenset[int]  # lost GPU indexes
    pods: frozenset[tuple[str, str]]  # (namespace, pod) of every live pod
    visible: frozenset[str]  # cids whose runtime records are listed

    def holders_of(self, uuid: str) -> frozenset[Holder]:
        for device in DEVICES:
            if device.uuid == uuid:
                return self.holders.get(device.key, frozenset())
        return frozenset()


@dataclass(slots=True)
class Span:
    """A truth and the fake-clock interval it was current: [start, end] (end None: now)."""

    truth: Truth
    start: float
    end: float | None = None


@dataclass(slots=True)
class Outage:
    """A source down from `start` until `end` (None: still down)."""

    start: float
    end: float | None = None


@dataclass
class NodeModel:
    """The node's state, changed by the rules; `truth()` and the history derive from it."""

    pods: dict[str, Pod] = field(default_factory=dict)
    processes: dict[int, Process] = field(default_factory=dict)
    lost: set[int] = field(default_factory=set)
    xids: dict[int, dict[int, int]] = field(default_factory=dict)  # gpu → code → count
    kubelet: str = "ok"  # ok | error | slow
    # The pods the kubelet's answer still lists while it lags the runtime (None: it does not):
    # it answers, but with the node as it was when it went stale.
    kubelet_stale: tuple[Pod, ...] | None = None
    kubelet_answered: tuple[Pod, ...] = ()  # the pods of its last answer
    # pod uids container_env has listed since its (re)start: what lets it tell a pod recreated
    # under its name from the old one (`note_runtime_listed`)
    runtime_listed: set[str] = field(default_factory=set)
    # per pod name, every pod uid container_env may have listed under it since its (re)start:
    # shown by the runtime while it was up (`note_runtime_seen`; what `labels_pending` needs)
    runtime_seen: dict[str, set[str]] = field(default_factory=dict)
    listed_from: float = float("-inf")  # when container_env last started
    # per pod name, when what the kubelet's answer lists for it last changed
    kubelet_changed_at: dict[str, float] = field(default_factory=dict)
    runtime_up: bool = True
    history: list[Span] = field(default_factory=list)
    kubelet_outages: list[Outage] = field(default_factory=list)
    runtime_outages: list[Outage] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # --- ids ----------------------------------------------------------------------------

    def new_id(self) -> int:
        return next(self._ids)

    def new_cid(self) -> str:
        return f"{self.new_id():064x}"

    # --- questions the rules ask -----------------------------------------------------------

    def holders(self) -> dict[str, list[tuple[Holder, Grant]]]:
        found: dict[str, list[tuple[Holder, Grant]]] = {}
        for pod in self.pods.values():
            for c in pod.containers:
                for grant in c.grants:
                    found.setdefault(grant.device, []).append(
                        ((pod.namespace, pod.name, c.name), grant)
                    )
        return found

    def kubelet_pods(self) -> tuple[Pod, ...]:
        """The pods the kubelet's answer lists: the node's, or those of when it went stale."""
        if self.kubelet_stale is not None:
            return self.kubelet_stale
        return tuple(self.pods.values())

    def note_runtime_listed(self, now: float, lag: float) -> None:
        """Notes the pods container_env has surely listed: its records shown, the runtime up
        and container_env started, all for `lag` (it lists once per `lag`)."""
        outages = self.runtime_outages
        up_since = float("-inf") if not outages else outages[-1].end
        if not self.runtime_up or up_since is None:
            return
        for pod in self.pods.values():
            shown = pod.visible_at
            if shown is not None and max(shown, up_since, self.listed_from) + lag <= now:
                self.runtime_listed.add(pod.uid)

    def note_runtime_seen(self) -> None:
        """Notes the pod uids the runtime shows now, which container_env may list (every
        state of the node is shown before the pipeline runs on it)."""
        if not self.runtime_up:
            return
        for pod in self.pods.values():
            if pod.in_runtime:
                self.runtime_seen.setdefault(pod.name, set()).add(pod.uid)

    def undecidable(self, name: str, answer: tuple[Pod, ...] | None = None) -> bool:
        """Whether a new pod under `name` could not be told from the one the stale kubelet
        (or `answer`) still lists under it: container_env never listed that one (its uid is
        all it has)."""
        listed = self.kubelet_stale if answer is None else answer
        if listed is None:
            return False
        return any(p.name == name and p.uid not in self.runtime_listed for p in listed)

    def replaced_undecidably(self, answer: tuple[Pod, ...]) -> bool:
        """Whether a pod of `answer` has already been replaced under its name by one that
        could not be told from it (what freezing `answer` would show at once)."""
        return any(
            (now := self.pods.get(p.name)) is not None
            and now.uid != p.uid
            and self.undecidable(p.name, answer)
            for p in answer
        )

    def labels_pending(self) -> frozenset[str]:
        """The containers whose business labels may be missing however long the node holds
        still: those of a pod recreated under its name while what the kubelet lists for the
        name has not changed since the runtime first listed the pod, as the running
        k8s_attributes saw it (what its first answer lists, it counts as unchanged since
        always: `NodeKubelet.asker_restarted`), and container_env may have listed another pod
        uid under the name since it started. The kubelet names pods, not pod uids: a listing
        unchanged since then may still mean the old pod (it can lag the runtime), so the
        pipeline waits for one that changed."""
        return frozenset(
            c.cid
            for pod in self.pods.values()
            if pod.successor
            and pod.visible_at is not None
            and self.kubelet_changed_at.get(pod.name, float("-inf")) <= pod.visible_at
            and self.runtime_seen.get(pod.name, set()) - {pod.uid}
            for c in pod.containers
        )

    def free_forms(self, device: str) -> tuple[str, ...]:
        """How a new holder may be given `device`: any form when free, a shared form of the
        same kind when every holder shares it, none when it is held exclusively."""
        held = self.holders().get(device, [])
        if not held:
            return FORMS
        forms = {grant.form for _, grant in held}
        if forms <= {"replica"}:
            return ("replica",)
        if forms <= {"dra_share"}:
            return ("dra_share",)
        return ()

    def container(self, cid: str) -> tuple[Pod, Container] | None:
        for pod in self.pods.values():
            for c in pod.containers:
                if c.cid == cid:
                    return pod, c
        return None

    # --- the truth --------------------------------------------------------------------------

    def truth(self) -> Truth:
        holders: dict[str, set[Holder]] = {}
        held_by: set[tuple[str, str]] = set()
        instances: dict[str, Instance] = {}
        visible: set[str] = set()
        for pod in self.pods.values():
            for c in pod.containers:
                holder = (pod.namespace, pod.name, c.name)
                instances[c.cid] = Instance(holder, c.cid, c.team, pod.app)
                if pod.in_runtime:
                    visible.add(c.cid)
                for grant in c.grants:
                    holders.setdefault(grant.device, set()).add(holder)
                    held_by.add((BY_KEY[grant.device].uuid, c.cid))
        return Truth(
            holders={k: frozenset(v) for k, v in holders.items()},
            instances=instances,
            held_by=frozenset(held_by),
            processes=dict(self.processes),
            lost=frozenset(self.lost),
            pods=frozenset((p.namespace, p.name) for p in self.pods.values()),
            visible=frozenset(visible),
        )

    def record(self, now: float) -> None:
        """Closes the current span at `now` and opens one with the new truth (after a rule)."""
        truth = self.truth()
        if self.history and self.history[-1].truth == truth:
            return
        if self.history:
            self.history[-1].end = now
        self.history.append(Span(truth, now))
        if len(self.history) > 64:  # far older than any window a check looks at
            del self.history[:-64]

    def set_source(self, outages: list[Outage], up: bool, now: float) -> None:
        """Opens or closes an outage of a source."""
        down = bool(outages) and outages[-1].end is None
        if up and down:
            outages[-1].end = now
        elif not up and not down:
            outages.append(Outage(now))
        del outages[:-16]

    def window(self, outages: Iterable[Outage], now: float, lag: float) -> list[Truth]:
        """The truths a source's consumer may still be showing at `now`: those current at
        some moment of [now - lag, now], and, while the source is down or within `lag` of
        coming back, every truth since `lag` before it went down (a source outage never
        changes labels: the last good snapshot keeps labelling)."""
        since = now - lag
        for outage in _merged(outages, lag):
            if outage.end is None or outage.end + lag >= now:
                since = min(since, outage.start - lag)
        return [s.truth for s in self.history if s.end is None or s.end >= since]

    def settled(self, outages: Iterable[Outage], now: float, lag: float) -> bool:
        """Whether a consumer has had `lag` to catch up with the present: the truth and the
        source have not changed for that long and the source is up."""
        if len(self.window(outages, now, lag)) != 1:
            return False
        return all(o.end is not None and o.end + lag < now for o in outages)


def _merged(outages: Iterable[Outage], lag: float) -> list[Outage]:
    """The outages as a consumer lives them: a source back for less than `lag` may not have
    been asked in between (the consumer asks it once per `lag`), so two outages that close
    together are one."""
    merged: list[Outage] = []
    for outage in sorted(outages, key=lambda o: o.start):
        last = merged[-1] if merged else None
        if last is not None and (last.end is None or outage.start - last.end < lag):
            end = None if last.end is None or outage.end is None else max(last.end, outage.end)
            merged[-1] = Outage(last.start, end)
        else:
            merged.append(outage)
    return merged


def with_containers(pod: Pod, containers: Iterable[Container]) -> Pod:
    return replace(pod, containers=tuple(containers))
