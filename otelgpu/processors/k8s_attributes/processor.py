"""The `k8s_attributes` processor: which container holds each GPU, from the kubelet.

`process` is a pure function of the batch and the latest snapshot (dict lookups only, no
I/O, never raises); the snapshot is refreshed by a task this processor owns.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping

from otelgpu import semconv
from otelgpu.component import Host, Settings
from otelgpu.model import Attributes, Batch, ResourceMetrics, with_resource
from otelgpu.processors.k8s_attributes.config import NODE_NAME_ENV, K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.devices import Key, resource_keys
from otelgpu.processors.k8s_attributes.pod_resources import (
    DeviceAllocation,
    GrpcPodResourcesClient,
    PodAllocation,
    PodResourcesClient,
)
from otelgpu.processors.k8s_attributes.refresher import SOURCE, SnapshotRefresher
from otelgpu.processors.k8s_attributes.snapshot import (
    Holder,
    ResourceFilter,
    Snapshot,
    build_snapshot,
    describe_forms,
    holder_labels,
)
from otelgpu.scraper import Clock, RealClock
from otelgpu.tasks import cancel_and_wait

# Why a GPU point left without pod labels (the `reason` of the unmatched counter).
NO_SNAPSHOT = "no_snapshot"  # the kubelet never answered
NOT_ALLOCATED = "not_allocated"  # the kubelet knows the GPU; no container holds it
UNKNOWN_DEVICE = "unknown_device"  # the kubelet does not know this GPU under any ID form
AMBIGUOUS_PROCESS = "ambiguous_process"  # a per-process series on a GPU with several holders
_ASKED_MAX = 4096  # unknown devices remembered (bounds memory if IDs churn)


class K8sAttributesProcessor:
    """Adds `k8s.namespace.name`, `k8s.pod.name`, `k8s.container.name` (and `k8s.node.name`)
    to GPU and MIG resources, one copy of the resource per holder of a shared GPU."""

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
        self._clock = clock or RealClock()
        self._environ = environ
        self._rng = rng
        self._id = str(settings.id)
        self._wanted = ResourceFilter(config.resource_names)
        self._node_name = config.node_name
        self._snapshot: Snapshot | None = None
        self._forms: frozenset[str] = frozenset()
        self._asked: set[tuple[Key, ...]] = set()
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
        )
        self._task = asyncio.create_task(self._refresher.run(), name=f"refresh:{self._id}")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        if self._client is not None:
            await self._client.close()

    def _install(
        self, pods: tuple[PodAllocation, ...], allocatable: tuple[DeviceAllocation, ...] | None
    ) -> None:
        snapshot = build_snapshot(
            pods,
            allocatable,
            wanted=self._wanted,
            id_type=self._config.device_id_type,
            node_name=self._node_name,
        )
        forms = frozenset(snapshot.forms)
        if forms != self._forms:  # say which ID forms the device plugin uses, once per change
            self._forms = forms
            self._settings.logger.info(
                "pod-resources device IDs seen (device_id_type=%s): %s",
                self._config.device_id_type,
                describe_forms(snapshot.forms),
            )
        self._snapshot = snapshot

    # --- the hot path ------------------------------------------------------------------

    def process(self, batch: Batch) -> Batch:
        snapshot = self._snapshot
        parents, names = _mig_parents(batch)
        resolved = [self._resolve(rm, snapshot, names) for rm in batch]
        via_mig = _holders_via_mig(batch, resolved)
        out: list[ResourceMetrics] = []
        unmatched: dict[str, int] = {}
        for rm, labels in zip(batch, resolved, strict=True):
            if labels is None:
                out.append(rm)
                continue
            if not labels:
                labels, reason = self._unmatched(rm, snapshot, parents, via_mig)
                if reason:
                    unmatched[reason] = unmatched.get(reason, 0) + _points(rm)
            if semconv.PROCESS_PID in rm.resource and len(labels) > 1:
                # One process lives in one container; which one the kubelet cannot say.
                unmatched[AMBIGUOUS_PROCESS] = unmatched.get(AMBIGUOUS_PROCESS, 0) + _points(rm)
                labels = (self._node_only(),)
            out.extend(with_resource(rm, attrs) for attrs in labels)
        for reason, n in unmatched.items():
            self._settings.telemetry.unmatched_points(self._id, n, reason)
        return tuple(out)

    def _resolve(
        self, rm: ResourceMetrics, snapshot: Snapshot | None, names: dict[str, str]
    ) -> tuple[Attributes, ...] | None:
        """None: not a GPU resource, or already labelled (passed through untouched).
        Empty: a GPU nobody holds (as far as the snapshot knows)."""
        resource = rm.resource
        if semconv.K8S_POD_NAME in resource:
            return None
        keys = resource_keys(resource, names)
        if not keys:
            return None
        found = snapshot.lookup(keys) if snapshot is not None else None
        return found[1] if found else ()

    def _unmatched(
        self,
        rm: ResourceMetrics,
        snapshot: Snapshot | None,
        parents: set[str],
        via_mig: dict[str, tuple[Attributes, ...]],
    ) -> tuple[tuple[Attributes, ...], str]:
        """Labels for a GPU with no direct holder, and why it has none ("" if it has)."""
        hw_id = str(rm.resource.get(semconv.HW_ID, ""))
        if hw_id in via_mig:  # a MIG-enabled GPU: held through its instances
            return via_mig[hw_id], ""
        if snapshot is None:
            return (self._node_only(),), NO_SNAPSHOT
        keys = resource_keys(rm.resource, {})
        if hw_id in parents or snapshot.is_known(keys):
            return (self._node_only(),), NOT_ALLOCATED
        asked = tuple(keys)
        if asked not in self._asked and self._refresher is not None:
            # One early refresh per unknown device: if the kubelet still does not know it
            # (a device-ID form mismatch), the regular refresh is soon enough.
            if len(self._asked) >= _ASKED_MAX:
                self._asked.clear()
            self._asked.add(asked)
            self._refresher.request()
        return (self._node_only(),), UNKNOWN_DEVICE

    def _node_only(self) -> Attributes:
        return {semconv.K8S_NODE_NAME: self._node_name} if self._node_name else {}


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
        elif semconv.HW_ID in resource and semconv.HW_NAME in resource:
            names[str(resource[semconv.HW_ID])] = str(resource[semconv.HW_NAME])
    return parents, names


def _holders_via_mig(
    batch: Batch, resolved: list[tuple[Attributes, ...] | None]
) -> dict[str, tuple[Attributes, ...]]:
    """A MIG-enabled GPU is held by the holders of its instances, as a shared GPU."""
    holders: dict[str, dict[Holder, None]] = {}
    node = ""
    for rm, labels in zip(batch, resolved, strict=True):
        parent = rm.resource.get(semconv.HW_PARENT)
        if parent is None or not labels or semconv.PROCESS_PID in rm.resource:
            continue
        for attrs in labels:
            holder = Holder(
                str(attrs[semconv.K8S_NAMESPACE_NAME]),
                str(attrs[semconv.K8S_POD_NAME]),
                str(attrs[semconv.K8S_CONTAINER_NAME]),
            )
            holders.setdefault(str(parent), {})[holder] = None
            node = str(attrs.get(semconv.K8S_NODE_NAME, ""))
    return {
        parent: holder_labels(tuple(sorted(hs)), shared=True, node_name=node)
        for parent, hs in holders.items()
    }
