"""Who holds what: per container, init containers, sidecars, sharing, resource names; the
snapshot's lookups, what it knows, and the pods and ID forms it counts."""

from __future__ import annotations

from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
)
from otelgpu.processors.k8s_attributes.snapshot import (
    Holder,
    ResourceFilter,
    build_snapshot,
    describe_forms,
)
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


def test_a_sole_holder_carries_the_node_name_and_the_device_gets_its_labels():
    snap = build_snapshot(
        [pod("ml", "p", container("c", {GPU: [UUID_A]}))],
        None,
        wanted=DEFAULT,
        id_type="auto",
        node_name="node-a",
    )
    found = snap.allocations[("id", UUID_A)]
    labels = {
        semconv.K8S_NAMESPACE_NAME: "ml",
        semconv.K8S_POD_NAME: "p",
        semconv.K8S_CONTAINER_NAME: "c",
        semconv.K8S_NODE_NAME: "node-a",
    }
    assert found.holders == ((labels, 1.0),)
    assert found.device == labels


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


def test_replica_ids_are_listed_in_numeric_order():
    ids = [f"{UUID_A}::{n}" for n in (10, 2, 1)]
    snap = build_snapshot(
        [pod("ml", "p", container("c", {GPU: ids}))], None, wanted=DEFAULT, id_type="auto"
    )
    ((labels, _),) = snap.allocations[("id", UUID_A)].holders
    assert labels[semconv.GPU_REPLICA] == "1,2,10"


def test_a_shared_device_without_a_node_name_has_only_the_sharing_labels():
    pods = [pod("ml", name, container("c", {GPU: [UUID_A]})) for name in ("a", "b", "c", "d")]
    found = build_snapshot(pods, None, wanted=DEFAULT, id_type="auto").allocations[("id", UUID_A)]
    assert found.device == {semconv.GPU_SHARED: True, semconv.GPU_HOLDERS: 4}
    assert [share for _, share in found.holders] == [0.25] * 4
    assert len(found.members) == 4


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


def test_resource_filter_answers_the_same_from_its_memo():
    wanted = ResourceFilter(["nvidia.com/gpu"])
    assert [wanted("nvidia.com/gpu"), wanted("nvidia.com/gpu")] == [True, True]
    assert [wanted("example.com/x"), wanted("example.com/x")] == [False, False]


def test_resource_filter_memo_is_bounded_but_answers_stay_right():
    wanted = ResourceFilter(["example.com/r1*"])
    answers = [wanted(f"example.com/r{i}") for i in range(1100)]
    assert answers.count(True) == 1 + 10 + 100 + 100  # r1, r10-r19, r100-r199, r1000-r1099
    assert wanted("example.com/r1050") and not wanted("example.com/r2000")


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


def test_lookup_takes_the_first_key_that_has_holders():
    pods = [
        pod("ml", "by-uuid", container("c", {GPU: [UUID_A]})),
        pod("ml", "by-index", container("c", {GPU: ["1"]})),
    ]
    snap = build_snapshot(pods, None, wanted=DEFAULT, id_type="auto")
    by_uuid, by_index = snap.allocations[("id", UUID_A)], snap.allocations[("index", "1")]
    assert snap.lookup([("id", UUID_B), ("index", "1"), ("id", UUID_A)]) is by_index
    assert snap.lookup([("id", UUID_A), ("index", "1")]) is by_uuid
    assert snap.lookup([("id", UUID_B), ("name", "nvidia0")]) is None
    assert snap.lookup([]) is None


def test_knows_only_what_the_kubelet_said_it_can_allocate():
    snap = build_snapshot([], allocatable({GPU: [UUID_A]}), wanted=DEFAULT, id_type="auto")
    assert snap.knows([("id", UUID_B), ("id", UUID_A)])
    assert not snap.knows([("id", UUID_B)])
    assert not snap.is_known([("id", UUID_B)])
    blind = build_snapshot([], None, wanted=DEFAULT, id_type="auto")
    assert not blind.knows([("id", UUID_A)])  # it cannot say: not "known"


def test_allocatable_devices_of_other_resources_or_empty_ids_are_not_known():
    answer = allocatable({GPU: ["", UUID_A], "example.com/fpga": [UUID_B]})
    snap = build_snapshot([], answer, wanted=DEFAULT, id_type="auto")
    assert snap.known == {("id", UUID_A)}


def test_pods_and_forms_are_counted():
    pods = [
        pod("ml", "a", container("c", {GPU: [UUID_A, "0::1", ""]})),
        pod("ml", "b"),
        pod("ml", "c", container("c", {"example.com/fpga": ["0"]})),
    ]
    snap = build_snapshot(pods, None, wanted=DEFAULT, id_type="auto")
    assert snap.pods == 3
    assert snap.forms == {"gpu-uuid": 1, "index": 1, "replica": 1}
    assert describe_forms(snap.forms) == "gpu-uuid=1, index=1, replica=1"
    assert describe_forms({}) == "none"


def test_claim_devices_are_counted_by_form() -> None:
    def pod(name: str, device: str) -> PodAllocation:
        claim = ClaimDevice("gpu.nvidia.com", "node-a", device)
        return PodAllocation("ml", name, (ContainerAllocation("c", (), (claim,)),))

    pods = [pod("a", "gpu-1"), pod("b", "gpu-2"), pod("c", "gpu-1-mig-1g24gb-19-4")]
    snap = build_snapshot(pods, None, wanted=ResourceFilter(["nvidia.com/gpu"]), id_type="auto")
    assert snap.forms == {"dra-gpu": 2, "dra-mig": 1}
    # a claim is no replica: its holder's series carry no nvidia.gpu.replica
    ((attrs, share),) = snap.allocations[("minor", "1")].holders
    assert semconv.GPU_REPLICA not in attrs and share == 1.0


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
