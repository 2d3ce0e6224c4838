"""The same pods listed in any order give the same snapshot (a kubelet's `List` order comes
from a Go map), and an answer that only moved pods around is not rebuilt."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes._proto import podresources_pb2 as pb
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
)
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.processors.k8s_attributes.snapshot import Holder, ResourceFilter, build_snapshot
from otelgpu.processors.k8s_attributes.wire import WireError
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.peers.kubelet import FakeKubelet
from tests.peers.kubelet import container as pb_container
from tests.peers.kubelet import pod as pb_pod
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    MIG_1,
    UUID_A,
    UUID_B,
    FakePodResources,
    allocations_of,
    container,
    gpu,
    make_processor,
    pod,
    series,
)

WANTED = ResourceFilter([GPU, "nvidia.com/mig-*"])


def shared_node() -> list[PodAllocation]:
    """A time-sliced GPU held by three pods (one of them twice, through two replicas), a
    whole GPU, a MIG instance and a DRA claim device: every kind of holder."""
    claim = ClaimDevice("gpu.nvidia.com", "node-a", "gpu-0", claim_name="gpu")
    dra = ContainerAllocation("c", (), (claim,))
    return [
        pod("ml", "infer-b", container("srv", {GPU: [f"{UUID_A}::3", f"{UUID_A}::0"]})),
        pod("ml", "infer-a", container("srv", {GPU: [f"{UUID_A}::1"]})),
        pod("web", "infer-c", container("srv", {GPU: [f"{UUID_A}::2"]})),
        pod("ml", "train-0", container("trainer", {GPU: [UUID_B]}), container("log")),
        pod("ml", "mig-0", container("m", {"nvidia.com/mig-1g.10gb": [MIG_1]})),
        PodAllocation("dra", "dra-0", (dra,)),
        pod("kube-system", "idle", container("pause")),
    ]


def test_the_same_pods_in_any_order_build_an_identical_snapshot():
    pods = shared_node()
    first = build_snapshot(pods, None, wanted=WANTED, id_type="auto", node_name="node-a")
    orders = [list(reversed(pods))] + [random.Random(s).sample(pods, len(pods)) for s in range(5)]
    for order in orders:
        snap = build_snapshot(order, None, wanted=WANTED, id_type="auto", node_name="node-a")
        assert snap == first
        # Not only equal mappings: the same order, for whatever iterates them.
        assert list(snap.allocations.items()) == list(first.allocations.items())
        assert list(snap.holders.items()) == list(first.holders.items())
        assert list(snap.forms.items()) == list(first.forms.items())
    shared = first.allocations[("id", UUID_A)]
    assert first.holders[("id", UUID_A)] == (
        Holder("ml", "infer-a", "srv"),
        Holder("ml", "infer-b", "srv"),
        Holder("web", "infer-c", "srv"),
    )
    assert [(h[semconv.K8S_POD_NAME], h[semconv.GPU_REPLICA]) for h, _ in shared.holders] == [
        ("infer-a", "1"),
        ("infer-b", "0,3"),
        ("infer-c", "2"),
    ]


async def test_the_processor_labels_a_shared_gpu_alike_whatever_the_order(clock: FakeClock):
    async def labels(pods: list[PodAllocation]) -> list[tuple[object, ...]]:
        telemetry = SelfTelemetry()
        client = FakePodResources()
        client.set(*pods)
        processor = make_processor(telemetry, client, clock)
        await processor.start(FakeHost(telemetry))
        try:
            return allocations_of(processor.process((gpu(UUID_A, 0),)), UUID_A)
        finally:
            await processor.shutdown()

    pods = shared_node()
    first = await labels(pods)
    assert [(a[1], a[4]) for a in first] == [("infer-a", "1"), ("infer-b", "0,3"), ("infer-c", "2")]
    for seed in range(4):
        assert await labels(random.Random(seed).sample(pods, len(pods))) == first


class ShufflingKubelet(FakeKubelet):
    """Lists its pods in a new order on every call, as a real kubelet does."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = random.Random(5)

    async def List(self, request: Any, context: Any) -> pb.ListPodResourcesResponse:
        self.rng.shuffle(self.pods)
        return await super().List(request, context)


async def test_a_reordered_answer_keeps_the_snapshot_and_restarts_its_age(
    telemetry: SelfTelemetry,
) -> None:
    """A kubelet that lists pods in a new order each time gives the same snapshot: it is kept
    (its age restarts), not parsed and rebuilt in full at every refresh."""
    kubelet = ShufflingKubelet()
    kubelet.set_pods(
        *(pb_pod("ml", f"p{i}", pb_container("c", {GPU: [f"{UUID_A}::{i}"]})) for i in range(30))
    )
    await kubelet.start()
    config = {"pod_resources_socket": str(kubelet.socket), "refresh_interval": "50ms"}
    processor = K8sAttributesProcessor(
        make_settings("k8s_attributes", Kind.PROCESSOR, telemetry),
        K8sAttributesProcessorConfig.model_validate({**config, "node_name": "node-a"}),
    )
    try:
        await processor.start(FakeHost(telemetry))
        refresher, first = processor.refresher, processor.snapshot
        assert refresher is not None and first is not None and first.pods == 30
        age = refresher.age()
        assert age is not None
        loop = asyncio.get_running_loop()
        since = loop.time()
        for _ in range(400):  # wait for four more answers (no figure is asserted on time)
            if refresher.attempts >= 5:
                break
            await asyncio.sleep(0.025)
        assert refresher.attempts >= 5
        assert refresher.rebuilds == 1 and processor.snapshot is first
        # Each unchanged answer still counts as a success: the age restarted since.
        assert (refresher.age() or 0.0) < age + (loop.time() - since)
        assert series(telemetry, "otelgpu_pod_resources_errors_total") is None
    finally:
        await processor.shutdown()
        await kubelet.close()


class MalformedClient(FakePodResources):
    async def list(self) -> tuple[PodAllocation, ...]:
        self.list_calls += 1
        if self.list_calls > 1:
            raise WireError("field 1 at byte 7: length 90 runs past the end of the 9-byte answer")
        return self.pods


async def test_a_malformed_answer_is_counted_and_the_snapshot_kept(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    client = MalformedClient()
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_B]})))
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    first = processor.snapshot
    await clock.advance(10)
    assert client.list_calls == 2 and processor.snapshot is first
    assert series(telemetry, "otelgpu_pod_resources_errors_total", code="INTERNAL") == 1
    assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 0
    await processor.shutdown()
