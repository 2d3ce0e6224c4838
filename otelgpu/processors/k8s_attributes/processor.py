"""The `k8s_attributes` processor: which container holds each GPU, from the kubelet.

`process` is a pure function of the batch and the latest snapshot (dict lookups only, no
I/O, never raises); the snapshot is refreshed by a task this processor owns. `start` returns
once the kubelet answered or failed once, so the first export is already labelled.

Series identity (SPEC "Shared GPUs and series identity"): each device stays one
resource. One holder: its labels go on the device. Several holders (time-slicing, MPS): none of
their labels go on the device (it gets `nvidia.gpu.shared` and `nvidia.gpu.holders`); each
holder gets an `nvidia.gpu.allocation` series instead. A MIG-enabled GPU never gets its
instances' holders. GPU processes are left to container_env (their own container).

Devices come from device plugins (`devices`) and from DRA claims (`dynamic_resources`); each
allocation point says which (`nvidia.gpu.allocation.source`), and NVIDIA claim devices that
reach no GPU of the batch are counted by reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
from collections.abc import Mapping
from dataclasses import replace

from otelgpu.component.clock import Clock
from otelgpu.component.component import Host, Settings
from otelgpu.component.tasks import cancel_and_wait
from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import (
    Attributes,
    Batch,
    ResourceMetrics,
    with_resource,
)
from otelgpu.processors.k8s_attributes.allocations import AllocationSeries
from otelgpu.processors.k8s_attributes.config import NODE_NAME_ENV, K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.devices import Key, device_file_name, resource_keys
from otelgpu.processors.k8s_attributes.pod_resources import (
    DeviceAllocation,
    GrpcPodResourcesClient,
    PodAllocation,
    PodResourcesClient,
)
from otelgpu.processors.k8s_attributes.refresher import SOURCE, SnapshotRefresher
from otelgpu.processors.k8s_attributes.snapshot import (
    DRA,
    Allocation,
    Holder,
    ResourceFilter,
    Snapshot,
    build_snapshot,
    describe_forms,
)

# Why a GPU point left without pod labels (the `reason` of the unmatched counter).
NO_SNAPSHOT = "no_snapshot"  # the kubelet never answered
NOT_ALLOCATED = "not_allocated"  # the kubelet knows the GPU; no container holds it
UNKNOWN_DEVICE = "unknown_device"  # the kubelet does not know this GPU under any ID form
_ASKED_MAX = 4096  # unknown devices remembered (bounds memory if IDs churn)
OFF_LOOP_PODS = 200  # pod-resources answers larger than this are indexed in a worker thread
DRA_UNMAPPED = "otelgpu_dra_devices_unmapped_total"
DRA_NO_GPU = "no_matching_gpu"  # the name is read, but no GPU/MIG resource of the batch has it
DRA_MIG_ENABLED = "mig_enabled"  # a whole-GPU claim on a GPU held through its MIG instances


class K8sAttributesProcessor:
    """Adds `k8s.namespace.name`, `k8s.pod.name`, `k8s.container.name` (and `k8s.node.name`)
    to the series of a GPU or MIG instance with one holder, and sends one
    `nvidia.gpu.allocation` series per holder of every allocated device. A device with several
    holders keeps one set of series carrying none of their labels (so sums stay true)."""

    def __init__(
        self,
        settings: Settings,
        config: K8sAttributesProcessorConfig,
        *,
        client: PodResourcesClient | None = None,
        clock: Clock | None = None,
        environ: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._settings = settings
        self._config = config
        self._client = client
        # The agent's clock unless a test gives one: the notes' times are on it
        self._clock = clock or settings.clock
        self._environ = environ
        self._rng = rng
        self._id = str(settings.id)
        self._wanted = ResourceFilter(config.resource_names)
        self._node_name = config.node_name
        self._snapshot: Snapshot | None = None
        self._forms: frozenset[str] = frozenset()
        self._asked: set[tuple[Key, ...]] = set()
        self._allocations = AllocationSeries()
        self._dra_said = ""
        # (device key, holder) → since when the kubelet lists it (-inf: its first answer did);
        # and per key, its holders' in the allocation's order (`notes.HOLDER_SINCE`)
        self._since: dict[tuple[Key, Holder], float] = {}
        self._since_by_key: dict[Key, tuple[float, ...]] = {}
        # per pod name, what the kubelet lists for it and since when (`notes.HOLDERS_CHANGED`;
        # -inf: its first answer after a start); per key, its holders' in the allocation's order
        self._listings: dict[tuple[str, str], frozenset[PodAllocation]] = {}
        self._listed_since: dict[tuple[str, str], float] = {}
        self._changed_by_key: dict[Key, tuple[float, ...]] = {}
        self._refresher: SnapshotRefresher | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot `process` reads (None until the kubelet first answers)."""
        return self._snapshot

    @property
    def refresher(self) -> SnapshotRefresher | None:
        """The refresh loop's state (None before `start`)."""
        return self._refresher

    async def start(self, host: Host) -> None:
        if self._task is not None:
            return
        environ = os.environ if self._environ is None else self._environ
        self._node_name = self._config.node_name or environ.get(NODE_NAME_ENV, "")
        if not self._node_name:
            self._settings.logger.info("%s is not set: no k8s.node.name", NODE_NAME_ENV)
        if self._client is None:
            self._client = GrpcPodResourcesClient(
                self._config.pod_resources_socket,
                timeout=self._config.timeout,
                max_receive_message_size=self._config.max_receive_message_size,
                # a kubelet back from a restart is reached within one refresh
                max_backoff=self._config.refresh_interval,
            )
        self._settings.telemetry.register_source(SOURCE)
        self._refresher = SnapshotRefresher(
            settings=self._settings,
            client=self._client,
            on_answer=self._install,
            interval=self._config.refresh_interval,
            timeout=self._config.timeout,
            clock=self._clock,
            rng=self._rng,
            listings=self._settings.pod_listings,
            listing_source=self._config.pod_resources_socket,
        )
        self._task = asyncio.create_task(self._refresher.run(), name=f"refresh:{self._id}")
        # The first export waits for the kubelet's first answer (or failure): a pipeline that
        # started exporting first would send every GPU unlabelled, then relabel it.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._refresher.attempt_timeout + 1.0):
                await self._refresher.first_attempt.wait()

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        if self._client is not None:
            await self._client.close()

    async def _install(
        self, pods: tuple[PodAllocation, ...], allocatable: tuple[DeviceAllocation, ...] | None
    ) -> None:
        build = functools.partial(
            build_snapshot,
            pods,
            allocatable,
            wanted=self._wanted,
            id_type=self._config.device_id_type,
            node_name=self._node_name,
        )
        # Indexing thousands of pods takes long enough to delay scrapes: off the event loop
        # (a small answer costs less than the hand-over to a thread).
        snapshot = await asyncio.to_thread(build) if len(pods) > OFF_LOOP_PODS else build()
        forms = frozenset(snapshot.forms)
        if forms != self._forms:  # say which ID forms the device plugin uses, once per change
            self._forms = forms
            self._settings.logger.info(
                "pod-resources device IDs seen (device_id_type=%s): %s",
                self._config.device_id_type,
                describe_forms(snapshot.forms),
            )
        if snapshot.dra_unmapped:
            self._say_dra(
                "DRA claim devices of gpu.nvidia.com that name no GPU on this node: "
                + describe_forms(snapshot.dra_unmapped)
            )
        self._holders_since(snapshot, pods)
        self._snapshot = snapshot

    def _holders_since(self, snapshot: Snapshot, pods: tuple[PodAllocation, ...]) -> None:
        """Notes since when each (device, holder) is listed, and since when the kubelet lists
        each holder's pod as it does now: new in this answer, since now; in the answer to the
        first request after a start, since always (the runtime is listed afresh at start too;
        a first answer that came only after failures may list pods newer than that listing,
        so its pairs are new)."""
        at_start = self._refresher is not None and self._refresher.attempts == 1
        now = float("-inf") if at_start else self._clock.monotonic()
        self._pods_since(pods, now)
        since: dict[tuple[Key, Holder], float] = {}
        by_key: dict[Key, tuple[float, ...]] = {}
        changed_by_key: dict[Key, tuple[float, ...]] = {}
        for key, holders in snapshot.holders.items():
            times = []
            for holder in holders:
                when = since[(key, holder)] = self._since.get((key, holder), now)
                times.append(when)
            by_key[key] = tuple(times)
            listed = self._listed_since
            changed_by_key[key] = tuple(listed.get((h.namespace, h.pod), now) for h in holders)
        self._since, self._since_by_key = since, by_key
        self._changed_by_key = changed_by_key

    def _pods_since(self, pods: tuple[PodAllocation, ...], now: float) -> None:
        """Since when the kubelet lists each pod name as it does now (`notes.HOLDERS_CHANGED`):
        it names pods, not pod uids, so a pod recreated under its name is told from the old
        one only by what the kubelet lists for the name changing (or going)."""
        by_name: dict[tuple[str, str], set[PodAllocation]] = {}
        for pod in pods:
            by_name.setdefault((pod.namespace, pod.name), set()).add(pod)
        listings = {name: frozenset(found) for name, found in by_name.items()}
        self._listed_since = {
            name: self._listed_since[name] if self._listings.get(name) == listing else now
            for name, listing in listings.items()
        }
        self._listings = listings

    # --- the hot path ------------------------------------------------------------------

    def process(self, batch: Batch) -> Batch:
        snapshot = self._snapshot
        parents, names = _mig_parents(batch)
        node = self._node_only()
        out: list[ResourceMetrics] = []
        unmatched: dict[tuple[str, object], int] = {}  # (reason, hw.id) → points
        dra_keys = snapshot.dra_keys if snapshot is not None else frozenset()
        seen: set[Key] = set()
        confirmed = self._confirmed()
        for rm in batch:
            resource = rm.resource
            keys = [] if semconv.K8S_POD_NAME in resource else resource_keys(resource, names)
            if not keys or not rm.metrics:  # no GPU, already labelled, or a gone identity
                out.append(rm)
                continue
            if dra_keys:
                seen.update(keys)
            hit = snapshot.lookup_key(keys) if snapshot is not None else None
            found = hit[1] if hit is not None else None
            if semconv.PROCESS_PID in resource:
                out.append(self._process_series(rm, snapshot, keys, found, node))
                continue
            if rm.notes and notes.GPU_PROCESSES in rm.notes:
                rm = _with_holders(rm, snapshot, keys, found)
            if found is not None and str(resource.get(semconv.HW_ID, "")) in parents:
                self._whole_claim_on_mig_gpu(rm, found)
                found = None
            if hit is not None and found is not None:
                since = self._since_by_key.get(hit[0], ())
                changed = self._changed_by_key.get(hit[0], ())
                out.append(_labelled(rm, found.device, (since, changed), confirmed))
                out.extend(self._allocations.series(rm, found, since, confirmed, changed=changed))
            else:
                reason = self._unmatched(rm, snapshot, keys, parents)
                if reason:
                    why = (reason, resource.get(semconv.HW_ID))
                    unmatched[why] = unmatched.get(why, 0) + _points(rm)
                out.append(with_resource(rm, node))
                gone = self._allocations.gone(rm)
                if gone is not None:
                    out.append(gone)
        for (reason, device), n in unmatched.items():
            self._settings.telemetry.unmatched_points(self._id, n, reason, device)
        if snapshot is not None and (snapshot.dra_unmapped or (seen and dra_keys - seen)):
            self._count_dra_unmapped(snapshot, dra_keys - seen if seen else frozenset())
        return tuple(out)

    def _confirmed(self) -> float:
        """When the kubelet last answered (`notes.HOLDERS_CONFIRMED`; -inf: never)."""
        age = self._refresher.age() if self._refresher is not None else None
        return float("-inf") if age is None else self._clock.monotonic() - age

    def _count_dra_unmapped(self, snapshot: Snapshot, missing: frozenset[Key]) -> None:
        """Counts (once per batch) the NVIDIA DRA claim devices that labelled nothing: those
        whose name reaches no GPU, and those whose GPU is not in this batch."""
        counts = {**snapshot.dra_unmapped, DRA_NO_GPU: len(missing)}
        for reason, n in counts.items():
            if n:
                self._count_unmapped(n, reason)
        if missing:
            self._say_dra(
                "DRA claim devices with no GPU or MIG instance in the batch (do the nvml "
                "resources carry nvidia.gpu.minor / nvidia.mig.placement_start?): "
                + ", ".join("/".join(key) for key in sorted(missing))
            )

    def _say_dra(self, message: str) -> None:
        """Logs a warning about unmapped DRA claim devices once per change of the message."""
        if message != self._dra_said:
            self._dra_said = message
            self._settings.logger.warning("%s", message)

    def _process_series(
        self,
        rm: ResourceMetrics,
        snapshot: Snapshot | None,
        keys: list[Key],
        found: Allocation | None,
        node: Attributes,
    ) -> ResourceMetrics:
        """A GPU process is labelled by the container it runs in (container_env, by its
        `container.id`), never by its GPU's allocation: a process of another pod on this GPU
        must not be billed to the GPU's holder. What the allocation is goes along as a note,
        so a later processor can tell a process outside it."""
        return _with_holders(with_resource(rm, node), snapshot, keys, found)

    def _count_unmapped(self, n: int, reason: str) -> None:
        self._settings.telemetry.count(
            DRA_UNMAPPED,
            n,
            processor=self._id,
            reason=reason,
        )

    def _whole_claim_on_mig_gpu(self, rm: ResourceMetrics, found: Allocation) -> None:
        """A MIG-enabled GPU is held only through its MIG instances: a whole-GPU DRA claim on
        it labels nothing (counted as `mig_enabled`, logged once per change)."""
        if DRA in found.sources:
            self._count_unmapped(sum(1 for s in found.sources if s == DRA), DRA_MIG_ENABLED)
            self._say_dra(
                f"a whole-GPU DRA claim names GPU {rm.resource.get(semconv.HW_ID)}, which has "
                "MIG enabled: it is held through its MIG instances, the claim labels nothing"
            )

    def _unmatched(
        self,
        rm: ResourceMetrics,
        snapshot: Snapshot | None,
        keys: list[Key],
        parents: set[str],
    ) -> str:
        """Why a GPU has no holder ("" when that is no fault: a MIG-enabled GPU is held
        through its instances, which carry their holders' labels)."""
        if str(rm.resource.get(semconv.HW_ID, "")) in parents:
            return ""
        if snapshot is None:
            return NO_SNAPSHOT
        plain = resource_keys(rm.resource, {})
        if snapshot.is_known(plain) or (snapshot.dra_keys and _dra_named(plain)):
            return NOT_ALLOCATED  # (DRA devices are not in GetAllocatableResources)
        asked = tuple(plain)
        if asked not in self._asked and self._refresher is not None:
            # One early refresh per unknown device: if the kubelet still does not know it
            # (a device-ID form mismatch), the regular refresh is soon enough.
            if len(self._asked) >= _ASKED_MAX:
                self._asked.clear()
            self._asked.add(asked)
            self._refresher.request()
        return UNKNOWN_DEVICE

    def _node_only(self) -> Attributes:
        return {semconv.K8S_NODE_NAME: self._node_name} if self._node_name else {}


def _labelled(
    rm: ResourceMetrics,
    labels: Attributes,
    times: tuple[tuple[float, ...], tuple[float, ...]],
    confirmed: float,
) -> ResourceMetrics:
    """`rm` with its holder's labels (existing attributes win) and, when it has one holder,
    since when that holder holds it, since when the kubelet lists its pod as it does now
    (`times`, per holder) and when the kubelet last answered (`notes.HOLDER_SINCE`,
    `HOLDERS_CHANGED`, `HOLDERS_CONFIRMED`): one copy of the resource."""
    resource = {**labels, **rm.resource} if labels else rm.resource
    since, changed = times
    if len(since) != 1 or len(changed) != 1:
        return rm if resource is rm.resource else replace(rm, resource=resource)
    held = {
        notes.HOLDER_SINCE: since[0],
        notes.HOLDERS_CONFIRMED: confirmed,
        notes.HOLDERS_CHANGED: changed[0],
    }
    return replace(rm, resource=resource, notes={**(rm.notes or {}), **held})


def _dra_named(keys: list[Key]) -> bool:
    return any(key[0] in ("minor", "mig-placement") for key in keys)


def _points(rm: ResourceMetrics) -> int:
    return sum(len(m.points) for m in rm.metrics)


def _mig_parents(batch: Batch) -> tuple[set[str], dict[str, str]]:
    """The GPUs with MIG instances in this batch, and every GPU's device name by UUID."""
    parents: set[str] = set()
    names: dict[str, str] = {}
    for rm in batch:
        resource = rm.resource
        parent = resource.get(semconv.HW_PARENT)
        if parent is not None:
            parents.add(str(parent))
        elif semconv.HW_ID in resource:
            name = device_file_name(resource)
            if name is not None:
                names[str(resource[semconv.HW_ID])] = name
    return parents, names


def _with_holders(
    rm: ResourceMetrics, snapshot: Snapshot | None, keys: list[Key], found: Allocation | None
) -> ResourceMetrics:
    """`rm` with the containers the kubelet allocated its device to (`notes.GPU_HOLDERS`), for
    the squatter check of its processes; unchanged when the kubelet cannot say."""
    if found is not None:
        members = found.members
    elif snapshot is not None and snapshot.knows(keys):
        members = frozenset()  # a GPU the kubelet knows and nobody holds
    else:
        return rm
    return replace(rm, notes={**(rm.notes or {}), notes.GPU_HOLDERS: members})
