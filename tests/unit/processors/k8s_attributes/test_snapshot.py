"""Who holds what: per container, init containers, sidecars, sharing, resource names."""

from __future__ import annotations

from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes.snapshot import Holder, ResourceFilter, build_snapshot
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    UUID_B,
    allocatable,
    container,
    pod,
)

DEFAULT = ResourceFilter(["nvidia.com/gpu", "nvidia.com/mig-*"])


def test_devices_belong_to_their_container_only():
    snap = build_snapshot(
        [pod("ml", "train-0", container("trainer", {GPU: [UUID_A]}), container("log-shipper"))],
        None,
        wanted=DEFAULT,
        id_type="auto",
    )
    assert snap.holders == {("id", UUID_A): (Holder("ml", "train-0", "trainer"),)}
    found = snap.allocations[("id", UUID_A)]
    labels = {
        semconv.K8S_NAMESPACE_NAME: "ml",
        semconv.K8S_POD_NAME: "train-0",
        semconv.K8S_CONTAINER_NAME: "trainer",
    }
    assert found.device == labels  # one holder: its labels on the device's own series
    assert found.holders == ((labels, 1.0),)
    assert found.members == {("ml", "train-0", "trainer")}


def test_init_container_does_not_steal_the_gpu():
    # The kubelet lists init containers first; the app container reuses their device.
    snap = build_snapshot(
        [
            pod(
                "ml",
                "train-0",
                container("fetch-weights", {GPU: [UUID_A]}),
                container("trainer", {GPU: [UUID_A]}),
            )
        ],
        None,
        wanted=DEFAULT,
        id_type="auto",
    )
    assert snap.holders[("id", UUID_A)] == (Holder("ml", "train-0", "trainer"),)


def test_time_sliced_replicas_make_every_pod_a_holder():
    pods = [pod("ml", f"infer-{i}", container("srv", {GPU: [f"{UUID_A}::{i}"]})) for i in range(3)]
    snap = build_snapshot(pods, None, wanted=DEFAULT, id_type="auto", node_name="node-a")
    found = snap.allocations[("id", UUID_A)]
    # The device's own series: shared, with no holder's labels.
    assert found.device == {
        semconv.K8S_NODE_NAME: "node-a",
        semconv.GPU_SHARED: True,
        semconv.GPU_HOLDERS: 3,
    }
    labels = [a for a, _ in found.holders]
    assert [a[semconv.K8S_POD_NAME] for a in labels] == ["infer-0", "infer-1", "infer-2"]
    assert [a[semconv.GPU_REPLICA] for a in labels] == ["0", "1", "2"]
    assert all(a[semconv.GPU_SHARED] is True and a[semconv.GPU_HOLDERS] == 3 for a in labels)
    assert all(a[semconv.K8S_NODE_NAME] == "node-a" for a in labels)
    assert sum(share for _, share in found.holders) == 1.0
    assert snap.forms == {"gpu-uuid": 3, "replica": 3}


def test_two_replicas_in_one_container_are_one_holder():
    snap = build_snapshot(
        [pod("ml", "big", container("srv", {GPU: [f"{UUID_A}::0", f"{UUID_A}::1"]}))],
        None,
        wanted=DEFAULT,
        id_type="auto",
    )
    found = snap.allocations[("id", UUID_A)]
    # The only holder of a time-sliced GPU: the GPU is its own, with both replica IDs.
    ((labels, share),) = found.holders
    assert share == 1.0 and labels[semconv.GPU_REPLICA] == "0,1"
    assert semconv.GPU_SHARED not in labels
    assert found.device == labels


def test_resource_names_are_globs():
    pods = [
        pod("a", "p1", container("c", {"nvidia.com/gpu.shared": [f"{UUID_A}::0"]})),
        pod("a", "p2", container("c", {"nvidia.com/mig-1g.10gb": ["MIG-x"]})),
        pod("a", "p3", container("c", {"example.com/fpga": [UUID_B]})),
    ]
    snap = build_snapshot(pods, None, wanted=DEFAULT, id_type="auto")
    assert set(snap.holders) == {("id", "MIG-x")}  # gpu.shared is opt-in, fpga never
    wider = ResourceFilter(["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"])
    snap = build_snapshot(pods, None, wanted=wider, id_type="auto")
    assert set(snap.holders) == {("id", UUID_A), ("id", "MIG-x")}


def test_allocatable_devices_are_known_even_when_idle():
    snap = build_snapshot(
        [],
        allocatable({GPU: [f"{UUID_A}::0", f"{UUID_A}::1", "0"], "example.com/x": ["nvidia9"]}),
        wanted=DEFAULT,
        id_type="auto",
    )
    assert snap.known == {("id", UUID_A), ("index", "0")}
    assert snap.is_known([("id", UUID_A)]) and not snap.is_known([("name", "nvidia9")])
    assert build_snapshot([], None, wanted=DEFAULT, id_type="auto").is_known([("id", "x")])


def test_two_pods_listing_one_gpu_without_replica_suffixes_share_it():
    """A GPU two pods both list by its plain UUID (MPS, or a device plugin without replica
    suffixes) is shared: no holder's labels on the device, 1/2 each on the allocations."""
    pods = [pod("ml", name, container("c", {GPU: [UUID_A]})) for name in ("a", "b")]
    snap = build_snapshot(pods, None, wanted=DEFAULT, id_type="auto", node_name="n")
    found = snap.allocations[("id", UUID_A)]
    assert semconv.K8S_POD_NAME not in found.device
    assert found.device[semconv.GPU_SHARED] is True and found.device[semconv.GPU_HOLDERS] == 2
    assert [(a[semconv.K8S_POD_NAME], share) for a, share in found.holders] == [
        ("a", 0.5),
        ("b", 0.5),
    ]
    assert all(semconv.GPU_REPLICA not in a for a, _ in found.holders)
