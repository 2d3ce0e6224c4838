"""What the processor notes on a device for later processors (its holders beside the nvml
receiver's process list, when the kubelet last answered), and the reason an unlabelled GPU
is counted under on a node with and without DRA claims."""

from __future__ import annotations

from dataclasses import replace

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import notes, semconv
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
)
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.fakes import FakeClock
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    MIG_1,
    UUID_A,
    FakePodResources,
    container,
    gpu,
    mig,
    pod,
    series,
)

UNMATCHED = "otelgpu_enrichment_unmatched_points_total"


async def test_a_device_with_the_receivers_process_list_gets_its_holders_beside_it(
    started: K8sAttributesProcessor, client: FakePodResources, clock: FakeClock
) -> None:
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    listed = replace(gpu(UUID_A), notes={notes.GPU_PROCESSES: ((4242, ""),)})
    out = started.process((listed,))
    assert out[0].notes is not None
    assert out[0].notes[notes.GPU_HOLDERS] == {("ml", "train-0", "trainer")}
    assert out[0].notes[notes.GPU_PROCESSES] == ((4242, ""),)


async def test_a_device_without_a_process_list_gets_no_holders_note(
    started: K8sAttributesProcessor, client: FakePodResources, clock: FakeClock
) -> None:
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    out = started.process((gpu(UUID_A),))
    assert out[0].notes is not None and notes.GPU_HOLDERS not in out[0].notes


async def test_the_holders_confirmed_note_is_when_the_kubelet_last_answered(
    started: K8sAttributesProcessor, client: FakePodResources, clock: FakeClock
) -> None:
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    answered = clock.now
    await clock.advance(4)  # no refresh due yet
    out = started.process((gpu(UUID_A),))
    assert out[0].notes is not None
    assert out[0].notes[notes.HOLDERS_CONFIRMED] == answered


async def test_an_unknown_gpu_with_a_minor_number_is_unknown_on_a_node_without_dra(
    started: K8sAttributesProcessor, telemetry: SelfTelemetry
) -> None:
    unknown = gpu("GPU-unknown", 5, points=1, **{semconv.GPU_MINOR: "5"})
    started.process((unknown,))
    assert series(telemetry, UNMATCHED, reason="unknown_device") == 1
    assert not series(telemetry, UNMATCHED, reason="not_allocated")


def _claim_pod(device: str) -> PodAllocation:
    claimed = ClaimDevice("gpu.nvidia.com", "node-a", device)
    return PodAllocation("ml", "claims", (ContainerAllocation("c", (), (claimed,)),))


async def test_on_a_dra_node_a_gpu_without_a_minor_number_is_unknown(
    started: K8sAttributesProcessor,
    telemetry: SelfTelemetry,
    client: FakePodResources,
    clock: FakeClock,
) -> None:
    """DRA devices are not in GetAllocatableResources: an unclaimed GPU is taken for an idle
    claimable one only when it has the names claims use (its minor number)."""
    client.set(_claim_pod("gpu-0"))
    await clock.advance(10)
    started.process((gpu("GPU-unknown", 5, points=1),))
    assert series(telemetry, UNMATCHED, reason="unknown_device") == 1
    assert not series(telemetry, UNMATCHED, reason="not_allocated")


async def test_on_a_dra_node_an_unclaimed_mig_instance_is_not_allocated(
    started: K8sAttributesProcessor,
    telemetry: SelfTelemetry,
    client: FakePodResources,
    clock: FakeClock,
) -> None:
    client.set(_claim_pod("gpu-0"))
    await clock.advance(10)
    instance = mig(MIG_1, "GPU-other", 1)
    instance = replace(
        instance,
        resource={**instance.resource, semconv.GPU_MINOR: "3", semconv.MIG_PLACEMENT_START: "0"},
    )
    started.process((instance,))
    assert series(telemetry, UNMATCHED, reason="not_allocated") == 1
    assert not series(telemetry, UNMATCHED, reason="unknown_device")
