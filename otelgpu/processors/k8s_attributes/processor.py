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
reach no GPU of the batch are counted by reason (`dra_report`). Since when each holder is
listed, noted for container_env, is worked out at each answer (`holder_times`).
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
from otelgpu.processors.k8s_attributes.dra_report import DraReport
from otelgpu.processors.k8s_attributes.holder_times import HolderTimes
from otelgpu.processors.k8s_attributes.pod_resources import (
    DeviceAllocation,
    GrpcPodResourcesClient,
    PodAllocation,
    PodResourcesClient,
)
from otelgpu.processors.k8s_attributes.refresher import SOURCE, SnapshotRefresher
from otelgpu.processors.k8s_attributes.snapshot import (
    Allocation,
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
        self._dra = DraReport(settings)
        self._times = HolderTimes()  # the notes' times, per device key
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
        self._dra.installed(snapshot)
        # New in this answer: since now; in the answer to the first request after a start,
        # since always (the runtime is listed afresh at start too; a first answer that came
        # only after failures may list pods newer than that listing, so its pairs are new).
        at_start = self._refresher is not None and self._refresher.attempts == 1
        now = float("-inf") if at_start else self._clock.monotonic()
        self._times.installed(snapshot, pods, now)
        self._snapshot = snapshot

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
                self._dra.whole_claim_on_mig_gpu(rm, found)
                found = None
            if hit is not None and found is not None:
                since, changed = self._times.of(hit[0])
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
            self._dra.unmapped(snapshot, dra_keys - seen if seen else frozenset())
        return tuple(out)

    def _confirmed(self) -> float:
        """When the kubelet last answered (`notes.HOLDERS_CONFIRMED`; -inf: never)."""
        age = self._refresher.age() if self._refresher is not None else None
        return float("-inf") if age is None else self._clock.monotonic() - age

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
