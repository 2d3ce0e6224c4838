"""The holders' times noted for container_env (`holder_times`), read per device key."""

from __future__ import annotations

from otelgpu.processors.k8s_attributes.holder_times import HolderTimes
from otelgpu.processors.k8s_attributes.pod_resources import PodAllocation
from otelgpu.processors.k8s_attributes.snapshot import ResourceFilter, Snapshot, build_snapshot
from tests.unit.processors.k8s_attributes.fakes import GPU, UUID_A, container, pod

KEY_A = ("id", UUID_A)  # the key the kubelet's ID of GPU A gives


def test_before_any_answer_a_device_has_no_holder_times() -> None:
    assert HolderTimes().of(KEY_A) == ((), ())


def test_a_device_nobody_holds_any_more_has_no_holder_times() -> None:
    times = HolderTimes()
    held = (pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})),)
    times.installed(_snapshot(held), held, 5.0)
    assert times.of(KEY_A) == ((5.0,), (5.0,))
    times.installed(_snapshot(()), (), 9.0)
    assert times.of(KEY_A) == ((), ())


def _snapshot(pods: tuple[PodAllocation, ...]) -> Snapshot:
    return build_snapshot(pods, None, wanted=ResourceFilter([GPU]), id_type="auto", node_name="")
