"""The claim a DRA holder got its device through: on its `nvidia.gpu.allocation` series only.

A device-plugin holder names no claim; a shared claim is named by each of its holders; a
container holding one device through several claims names them all; the device's own series
keep only the holder's pod, namespace and container.
"""

from __future__ import annotations

import random

from otelgpu.pdata import semconv
from otelgpu.pdata.model import Attributes
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
)
from otelgpu.processors.k8s_attributes.snapshot import Allocation, ResourceFilter, build_snapshot
from tests.unit.processors.k8s_attributes.fakes import GPU, UUID_A, container, pod

CLAIM_NAME = semconv.GPU_RESOURCECLAIM_NAME
CLAIM_NAMESPACE = semconv.GPU_RESOURCECLAIM_NAMESPACE
WANTED = ResourceFilter([GPU])


def _claim(device: str, name: str, namespace: str = "ml", share_id: str = "") -> ClaimDevice:
    return ClaimDevice(
        "gpu.nvidia.com", "node-a", device, share_id=share_id,
        claim_namespace=namespace, claim_name=name,
    )  # fmt: skip


def _dra(namespace: str, name: str, *containers: tuple[str, tuple[ClaimDevice, ...]]):
    return PodAllocation(
        namespace, name, tuple(ContainerAllocation(c, (), claims) for c, claims in containers)
    )


def _allocation(pods: list[PodAllocation], key: tuple[str, ...]) -> Allocation:
    snap = build_snapshot(pods, None, wanted=WANTED, id_type="auto", node_name="node-a")
    return snap.allocations[key]


def _claims(attrs: Attributes) -> tuple[object, object]:
    return attrs.get(CLAIM_NAMESPACE), attrs.get(CLAIM_NAME)


def test_a_dra_holder_names_its_claim_on_the_allocation_series_only():
    found = _allocation([_dra("ml", "train-0", ("c", (_claim("gpu-1", "gpus"),)))], ("minor", "1"))
    ((attrs, share),) = found.holders
    assert _claims(attrs) == ("ml", "gpus") and share == 1.0
    assert attrs[semconv.K8S_POD_NAME] == "train-0"
    # The device's own series: the holder's pod, namespace and container, no claim.
    assert found.device[semconv.K8S_POD_NAME] == "train-0"
    assert CLAIM_NAME not in found.device and CLAIM_NAMESPACE not in found.device


def test_a_device_plugin_holder_names_no_claim():
    found = _allocation([pod("ml", "p", container("c", {GPU: [UUID_A]}))], ("id", UUID_A))
    ((attrs, _),) = found.holders
    assert _claims(attrs) == (None, None)


def test_a_claim_without_a_name_adds_no_empty_attribute():
    found = _allocation([_dra("ml", "p", ("c", (_claim("gpu-1", "", namespace=""),)))],
                        ("minor", "1"))  # fmt: skip
    ((attrs, _),) = found.holders
    assert _claims(attrs) == (None, None)


def test_a_shared_claim_is_named_by_each_of_its_holders():
    shared = _claim("gpu-0", "team-gpu")
    found = _allocation(
        [_dra("ml", "a", ("srv", (shared,))), _dra("ml", "b", ("srv", (shared,)))],
        ("minor", "0"),
    )
    assert [(a[semconv.K8S_POD_NAME], *_claims(a), s) for a, s in found.holders] == [
        ("a", "ml", "team-gpu", 0.5),
        ("b", "ml", "team-gpu", 0.5),
    ]
    assert CLAIM_NAME not in found.device and semconv.K8S_POD_NAME not in found.device


def test_two_pods_claims_on_one_device_each_name_their_own():
    found = _allocation(
        [
            _dra("ml", "by-dra", ("c", (_claim("gpu-0", "mine"),))),
            _dra("ml", "other", ("c", (_claim("gpu-0", "theirs"),))),
        ],
        ("minor", "0"),
    )
    assert [_claims(a) for a, _ in found.holders] == [("ml", "mine"), ("ml", "theirs")]


def test_one_container_holding_a_device_through_two_claims_names_both_sorted():
    # Two claims, one device (shareable: two share IDs; or admin access: the same one).
    for share_ids in (("s-2", "s-1"), ("", "")):
        claims = (
            _claim("gpu-1", "zeta", share_id=share_ids[0]),
            _claim("gpu-1", "alpha", share_id=share_ids[1]),
        )
        found = _allocation([_dra("ml", "p", ("c", claims))], ("minor", "1"))
        ((attrs, share),) = found.holders
        assert _claims(attrs) == ("ml", "alpha,zeta") and share == 1.0, share_ids
        reversed_claims = _allocation([_dra("ml", "p", ("c", claims[::-1]))], ("minor", "1"))
        assert reversed_claims == found


def test_the_same_claim_listed_twice_is_named_once():
    twice = (_claim("gpu-1", "gpus", share_id="s-1"), _claim("gpu-1", "gpus", share_id="s-2"))
    ((attrs, _),) = _allocation([_dra("ml", "p", ("c", twice))], ("minor", "1")).holders
    assert _claims(attrs) == ("ml", "gpus")


def test_within_a_pod_the_last_container_holds_the_claimed_device_and_names_the_claim():
    claim = _claim("gpu-1", "gpus")
    found = _allocation([_dra("ml", "p", ("init", (claim,)), ("app", (claim,)))], ("minor", "1"))
    ((attrs, _),) = found.holders
    assert (attrs[semconv.K8S_CONTAINER_NAME], *_claims(attrs)) == ("app", "ml", "gpus")


def _claims_reversed(p: PodAllocation) -> PodAllocation:
    containers = tuple(ContainerAllocation(c.name, c.devices, c.claims[::-1]) for c in p.containers)
    return PodAllocation(p.namespace, p.name, containers)


def test_claims_do_not_depend_on_the_order_of_pods_or_claims():
    pods = [
        _dra(
            "ml", "a", ("c", (_claim("gpu-0", "z", share_id="1"), _claim("gpu-0", "y", "ml", "2")))
        ),
        _dra("ml", "b", ("c", (_claim("gpu-0", "shared"),))),
        _dra("web", "c", ("c", (_claim("gpu-0", "shared", "web"),))),
        pod("ml", "plugin", container("c", {GPU: ["0"]})),
    ]
    first = build_snapshot(pods, None, wanted=WANTED, id_type="auto", node_name="node-a")
    for seed in range(6):
        order = random.Random(seed).sample(pods, len(pods))
        if seed % 2:  # and each container's claims in the other order
            order = [_claims_reversed(p) for p in order]
        snap = build_snapshot(order, None, wanted=WANTED, id_type="auto", node_name="node-a")
        assert snap == first
        assert list(snap.allocations.items()) == list(first.allocations.items())
    claims = [_claims(a) for a, _ in first.allocations[("minor", "0")].holders]
    assert claims == [("ml", "y,z"), ("ml", "shared"), ("web", "shared")]
