"""The holders' times noted for container_env (`holder_times`), read per device key."""

from __future__ import annotations

import math

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
    assert times.of(KEY_A) == ((5.0,), (-math.inf,))
    times.installed(_snapshot(()), (), 9.0)
    assert times.of(KEY_A) == ((), ())


def test_the_first_answer_installed_lists_its_pods_since_always_and_its_pairs_since_it_came() -> (
    None
):
    """An answer that came only after failures says nothing of how long the kubelet had
    listed its pods; its pairs are noted since it came (the latest they can be new)."""
    times = HolderTimes()
    held = (pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})),)
    times.installed(_snapshot(held), held, 5.0)
    assert times.of(KEY_A) == ((5.0,), (-math.inf,))
    times.installed(_snapshot(held), held, 6.0)  # unchanged: both times kept
    assert times.of(KEY_A) == ((5.0,), (-math.inf,))
    grown = (pod("ml", "train-0", container("trainer", {GPU: [UUID_A]}), container("side")),)
    times.installed(_snapshot(grown), grown, 7.0)  # the pod's listing changed, not the pair
    assert times.of(KEY_A) == ((5.0,), (7.0,))


def _snapshot(pods: tuple[PodAllocation, ...]) -> Snapshot:
    return build_snapshot(pods, None, wanted=ResourceFilter([GPU]), id_type="auto", node_name="")
