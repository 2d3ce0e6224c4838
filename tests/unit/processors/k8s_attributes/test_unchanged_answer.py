"""An unchanged pod-resources answer does not rebuild the snapshot (P4: the rebuild is the part
of the enrichment cost that grows with the node's pod count)."""

from __future__ import annotations

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.k8s_attributes.pod_resources import GrpcPodResourcesClient
from tests.fakes import FakeClock, FakeHost
from tests.peers.kubelet import FakeKubelet, kubelet
from tests.peers.kubelet import container as pb_container
from tests.peers.kubelet import pod as pb_pod
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    UUID_B,
    FakePodResources,
    allocatable,
    container,
    gpu,
    holders_of,
    make_processor,
    pod,
    series,
)

__all__ = ["kubelet"]  # the pytest fixture, imported for use here


async def test_an_equal_answer_keeps_the_snapshot_and_still_counts_as_a_success(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    client = FakePodResources()
    client.devices = allocatable({GPU: [UUID_A, UUID_B]})
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)
    first = processor.snapshot
    assert first is not None and processor.refresher is not None
    # Equal but not the same objects: as a client that parsed the same answer again.
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(30)
    assert client.list_calls == 4
    assert processor.snapshot is first
    assert processor.refresher.rebuilds == 1
    assert series(telemetry, "otelgpu_pod_resources_snapshot_age_seconds") <= 10
    assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 1
    # A changed answer is built and served at once.
    client.set(pod("ml", "train-1", container("trainer", {GPU: [UUID_B]})))
    await clock.advance(10)
    assert processor.snapshot is not first
    assert holders_of(processor.process((gpu(UUID_B, 1),)), UUID_B) == [
        ("ml", "train-1", "trainer")
    ]
    client.devices = allocatable({GPU: [UUID_A]})  # only the allocatable devices change
    await clock.advance(10)
    assert processor.refresher.rebuilds == 3
    await processor.shutdown()


async def test_the_grpc_client_returns_the_same_pods_for_the_same_bytes(
    kubelet: FakeKubelet,
) -> None:
    kubelet.set_pods(pb_pod("ml", "train-0", pb_container("trainer", {GPU: [UUID_A]})))
    client = GrpcPodResourcesClient(
        str(kubelet.socket), timeout=5.0, max_receive_message_size=1 << 20
    )
    try:
        first = await client.list()
        assert await client.list() is first  # not parsed again
        kubelet.set_pods(pb_pod("ml", "train-1", pb_container("trainer", {GPU: [UUID_B]})))
        changed = await client.list()
        assert [p.name for p in changed] == ["train-1"]
        kubelet.set_pods()
        assert await client.list() == ()
    finally:
        await client.close()
