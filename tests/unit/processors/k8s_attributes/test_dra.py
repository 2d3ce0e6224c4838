"""DRA claim devices (pod-resources `dynamic_resources`): parsing, the snapshot, the processor."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from otelgpu.pdata import semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.k8s_attributes._proto import podresources_pb2 as pb
from otelgpu.processors.k8s_attributes.devices import (
    parse_dra_device,
    resource_keys,
)
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
    parse_list,
)
from otelgpu.processors.k8s_attributes.snapshot import ResourceFilter, build_snapshot
from tests.fakes import FakeClock
from tests.peers.kubelet import claim, claim_device
from tests.peers.kubelet import container as pb_container
from tests.peers.kubelet import pod as pb_pod
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    MIG_1,
    MIG_2,
    UUID_A,
    UUID_B,
    FakePodResources,
    allocations_of,
    container,
    gpu,
    holders_of,
    mig,
    series,
)

UNMAPPED = "otelgpu_dra_devices_unmapped_total"
CLAIM_UID = "dab5ab50-1234-4bcd-8ef0-0123456789ab"


@pytest.mark.parametrize(
    ("driver", "device", "cdi", "expected"),
    [
        ("gpu.nvidia.com", "gpu-1", (), (("minor", "1"), "dra-gpu")),
        ("gpu.nvidia.com", "gpu-12", (), (("minor", "12"), "dra-gpu")),
        # driver 25.12+: profile, GI profile ID, placement start
        ("gpu.nvidia.com", "gpu-1-mig-2g47gb-14-4", (), (("mig-placement", "1", "4"), "dra-mig")),
        ("gpu.nvidia.com", "gpu-2-mig-1g24gb-19-0", (), (("mig-placement", "2", "0"), "dra-mig")),
        # driver 25.3/25.8: GI profile ID, placement start, placement size
        ("gpu.nvidia.com", "gpu-1-mig-19-3-1", (), (("mig-placement", "1", "3"), "dra-mig")),
        ("gpu.nvidia.com", "gpu-vfio-0", (), (None, "vfio")),
        ("gpu.nvidia.com", "channel-0", (), (None, "unknown_name")),
        ("net.example.com", "gpu-0", (), (None, "")),  # another driver: not ours, not counted
        # 1.27-1.30 kubelets: no driver/device name, only CDI names
        ("", "", ("k8s.gpu.nvidia.com/device=gpu-3",), (("minor", "3"), "dra-gpu")),
        (
            "",
            "",
            (f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0-mig-1g24gb-19-2",),
            (("mig-placement", "0", "2"), "dra-mig"),
        ),
        ("", "", ("vendor.example.com/nic=eth1",), (None, "")),
    ],
)
def test_dra_device_names(driver, device, cdi, expected):
    assert parse_dra_device(driver, device, cdi) == expected


def test_cdi_names_are_read_only_when_the_kubelet_sent_neither_driver_nor_device() -> None:
    cdi = ("k8s.gpu.nvidia.com/device=gpu-3",)
    assert parse_dra_device("", "", cdi)[0] == ("minor", "3")  # a kubelet before 1.31
    # A newer kubelet that names the driver but no device: the CDI name is not a second source.
    key, reason = parse_dra_device("gpu.nvidia.com", "", cdi)
    assert key is None and reason
    key, _ = parse_dra_device("", "gpu-5", cdi)
    assert key != ("minor", "3")


def test_gpu_answers_to_its_minor_and_a_mig_instance_to_parent_minor_and_start():
    whole = {semconv.HW_ID: UUID_A, semconv.GPU_INDEX: "0", semconv.GPU_MINOR: "1"}
    assert ("minor", "1") in resource_keys(whole, {})
    instance = {
        semconv.HW_ID: MIG_1,
        semconv.HW_PARENT: UUID_A,
        semconv.GPU_MINOR: "1",  # inherited from its GPU
        semconv.MIG_GPU_INSTANCE_ID: "5",
        semconv.MIG_COMPUTE_INSTANCE_ID: "0",
        semconv.MIG_PLACEMENT_START: "4",
    }
    keys = resource_keys(instance, {})
    assert ("mig-placement", "1", "4") in keys
    assert ("minor", "1") not in keys  # a whole-GPU claim never lands on an instance


def test_list_answer_carries_the_claim_devices():
    answer = pb.ListPodResourcesResponse(
        pod_resources=[
            pb_pod(
                "ml",
                "train-0",
                pb_container(
                    "trainer",
                    None,
                    claim("gpus", "ml", claim_device("gpu-1", share_id="s-1")),
                ),
            )
        ]
    )
    (found,) = parse_list(answer.SerializeToString())
    (c,) = found.containers
    assert c.claims == (
        ClaimDevice(
            driver="gpu.nvidia.com",
            pool="node-a",
            device="gpu-1",
            share_id="s-1",
            claim_namespace="ml",
            claim_name="gpus",
        ),
    )


def _dra_pod(name: str, *devices: ClaimDevice, container_name: str = "c") -> PodAllocation:
    return PodAllocation("ml", name, (ContainerAllocation(container_name, (), devices),))


def _device(name: str, pool: str = "node-a") -> ClaimDevice:
    return ClaimDevice("gpu.nvidia.com", pool, name)


def test_snapshot_holds_claim_devices_of_this_node_and_counts_the_rest():
    pods = [
        _dra_pod("a", _device("gpu-1")),
        _dra_pod("b", _device("gpu-2", pool="node-b")),
        _dra_pod("c", _device("gpu-vfio-0")),
        _dra_pod("d", ClaimDevice("net.example.com", "node-a", "gpu-3")),
    ]
    snap = build_snapshot(
        pods, None, wanted=ResourceFilter([GPU]), id_type="auto", node_name="node-a"
    )
    assert set(snap.allocations) == {("minor", "1")}
    assert snap.allocations[("minor", "1")].sources == ("dra",)
    assert snap.dra_unmapped == {"other_pool": 1, "vfio": 1}
    assert snap.dra_keys == frozenset({("minor", "1")})


def test_a_device_shared_by_two_pods_claims_is_shared():
    pods = [_dra_pod("a", _device("gpu-0")), _dra_pod("b", _device("gpu-0"))]
    snap = build_snapshot(pods, None, wanted=ResourceFilter([GPU]), id_type="auto")
    found = snap.allocations[("minor", "0")]
    assert found.device[semconv.GPU_HOLDERS] == 2
    assert [share for _, share in found.holders] == [0.5, 0.5]


def _minor(rm: ResourceMetrics, minor: int, **extra: str) -> ResourceMetrics:
    """`rm` with the GPU's minor number (on a MIG instance: its parent's, as nvml sets it)."""
    return replace(rm, resource={**rm.resource, semconv.GPU_MINOR: str(minor), **extra})


async def test_dra_gpu_is_found_by_minor_not_index(started, client, clock):
    # NVML index 0 is /dev/nvidia1 here: the claim on gpu-1 is that GPU, not index 1.
    client.set(_dra_pod("train-0", _device("gpu-1"), container_name="trainer"))
    await clock.advance(10)
    out = started.process((_minor(gpu(UUID_A, 0), 1), _minor(gpu(UUID_B, 1), 0)))
    assert holders_of(out, UUID_A) == [("ml", "train-0", "trainer")]
    assert holders_of(out, UUID_B) == [(None, None, None)]
    (alloc,) = [rm for rm in out if rm.metrics[0].name == semconv.GPU_ALLOCATION]
    assert alloc.metrics[0].points[0].attributes[semconv.GPU_ALLOCATION_SOURCE] == "dra"


async def test_each_allocation_says_its_path(started, client, clock):
    client.set(
        _dra_pod("by-dra", _device("gpu-1")),
        PodAllocation("ml", "by-plugin", (container("c", {GPU: [UUID_B]}),)),
    )
    await clock.advance(10)
    out = started.process((_minor(gpu(UUID_A, 0), 1), _minor(gpu(UUID_B, 1), 0)))
    sources = {
        rm.resource[semconv.K8S_POD_NAME]: rm.metrics[0]
        .points[0]
        .attributes[semconv.GPU_ALLOCATION_SOURCE]
        for rm in out
        if rm.metrics[0].name == semconv.GPU_ALLOCATION
    }
    assert sources == {"by-dra": "dra", "by-plugin": "device_plugin"}


async def test_dra_mig_claim_lands_on_its_instance(started, client, clock):
    client.set(_dra_pod("infer", _device("gpu-1-mig-1g24gb-19-3")))
    await clock.advance(10)
    batch = (
        _minor(gpu(UUID_A, 0), 1),
        _minor(mig(MIG_1, UUID_A, 1), 1, **{semconv.MIG_PLACEMENT_START: "0"}),
        _minor(mig(MIG_2, UUID_A, 2), 1, **{semconv.MIG_PLACEMENT_START: "3"}),
    )
    out = started.process(batch)
    assert holders_of(out, MIG_2) == [("ml", "infer", "c")]
    assert holders_of(out, MIG_1) == [(None, None, None)]
    assert holders_of(out, UUID_A) == [(None, None, None)]  # never the instance's holder
    assert [a[:4] for a in allocations_of(out, MIG_2)] == [("ml", "infer", "c", 1.0)]


async def test_unmapped_claim_devices_are_counted_by_reason(
    started, telemetry, client, clock, caplog
):
    client.set(
        _dra_pod("vm", _device("gpu-vfio-0")),
        _dra_pod("gone", _device("gpu-7")),  # no GPU with minor 7 in the batch
    )
    await clock.advance(10)
    with caplog.at_level(logging.WARNING):
        started.process((_minor(gpu(UUID_A, 0), 0),))
    assert series(telemetry, UNMAPPED, reason="vfio") == 1
    assert series(telemetry, UNMAPPED, reason="no_matching_gpu") == 1
    assert "minor/7" in caplog.text and "vfio=1" in caplog.text


async def test_idle_gpu_on_a_dra_node_is_not_allocated_rather_than_unknown(
    started, telemetry, client, clock
):
    client.set(_dra_pod("a", _device("gpu-0")))
    await clock.advance(10)
    started.process((_minor(gpu(UUID_A, 0), 0), _minor(gpu("GPU-idle", 3), 3)))
    assert series(telemetry, "otelgpu_enrichment_unmatched_points_total", reason="not_allocated")
    assert not series(
        telemetry, "otelgpu_enrichment_unmatched_points_total", reason="unknown_device"
    )


async def _whole_gpu_claimed_with_mig_on(
    client: FakePodResources, clock: FakeClock
) -> tuple[ResourceMetrics, ...]:
    """A pod whose DRA claim names GPU minor 1 whole, and a batch in which that GPU (UUID_A)
    has MIG enabled: the GPU and one of its instances."""
    client.set(_dra_pod("whole", _device("gpu-1")))
    await clock.advance(10)
    return (
        _minor(gpu(UUID_A, 0), 1),
        _minor(mig(MIG_1, UUID_A, 1), 1, **{semconv.MIG_PLACEMENT_START: "0"}),
    )


async def test_a_whole_gpu_claim_on_a_mig_enabled_gpu_is_logged_naming_the_gpu_once(
    started, telemetry, client, clock, caplog
):
    batch = await _whole_gpu_claimed_with_mig_on(client, clock)
    with caplog.at_level(logging.WARNING):
        started.process(batch)
        started.process(batch)
    said = [r.getMessage() for r in caplog.records if "MIG enabled" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(f"a whole-GPU DRA claim names GPU {UUID_A}, which has MIG enabled")
    assert series(telemetry, UNMAPPED, reason="mig_enabled") == 2  # counted on every batch


async def test_a_whole_gpu_claim_on_a_mig_enabled_gpu_labels_nothing(
    started, telemetry, client, clock, caplog
):
    """A MIG-enabled GPU is held through its instances: a whole-GPU claim naming it does not
    put a pod on the parent's series (it did), and is counted and logged as `mig_enabled`."""
    batch = await _whole_gpu_claimed_with_mig_on(client, clock)
    with caplog.at_level(logging.WARNING):
        out = started.process(batch)
    assert holders_of(out, UUID_A) == [(None, None, None)]
    assert allocations_of(out, UUID_A) == []
    assert series(telemetry, UNMAPPED, reason="mig_enabled") == 1
    assert "MIG enabled" in caplog.text
