"""A stale kubelet and a pod recreated under its name, against a real containerd (PEERS.md) and
the kubelet's pod-resources wire protocol (`tests.peers.kubelet.FakeKubelet`).

k8s_attributes asks the pod-resources server on its own loop; container_env lists containerd
when the test says so. Both run on the real monotonic clock, as in the agent: their notes
compare times. Waits are on events (the server counting the answers it gave), never on time.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.factory import runtimes_for
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.integration.test_pod_resources import wait_for
from tests.peers.cri_records import Pod, create_container, create_sandbox, stop_pod
from tests.peers.kubelet import FakeKubelet, container, kubelet, pod
from tests.peers.runtime import Containerd
from tests.unit.processors.k8s_attributes.fakes import UUID_A, UUID_B, gpu, series

__all__ = ["kubelet"]  # the pytest fixture, imported for use here

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
TEAM = "container.env.TEAM"
UNMATCHED = "otelgpu_enrichment_unmatched_points_total"


async def _answers(kubelet: FakeKubelet, n: int, timeout: float = 10.0) -> None:
    """Waits until the server was asked for its allocatable devices `n` times in all: the
    last call of a refresh, so `n - 1` refreshes are complete."""
    await wait_for(lambda: kubelet.count("GetAllocatableResources") >= n, timeout)


def _run(socket: Path, p: Pod, team: str) -> None:
    create_sandbox(socket, p)
    create_container(socket, p, "trainer", env={"TEAM": team})


def _by_gpu(batch: tuple[ResourceMetrics, ...]) -> dict[str, dict[str, object]]:
    return {str(rm.resource[semconv.HW_ID]): dict(rm.resource) for rm in batch if rm.metrics}


def _processors(
    containerd: Containerd, kubelet: FakeKubelet, telemetry: SelfTelemetry
) -> tuple[ContainerEnvProcessor, K8sAttributesProcessor]:
    env = ContainerEnvProcessor(
        make_settings("container_env", Kind.PROCESSOR, telemetry),
        ContainerEnvProcessorConfig.model_validate(
            {
                "runtime": "containerd",
                "containerd": {"socket": str(containerd.socket)},
                "env": {"include": ["TEAM"]},
                "refresh_interval": "1h",  # listed when the test says (`refresh`)
            }
        ),
        runtimes_for,
    )
    k8s = K8sAttributesProcessor(
        make_settings("k8s_attributes", Kind.PROCESSOR, telemetry),
        K8sAttributesProcessorConfig.model_validate(
            {
                "pod_resources_socket": str(kubelet.socket),
                "refresh_interval": "100ms",
                "timeout": "2s",
                "node_name": "node-a",
            }
        ),
    )
    return env, k8s


def _cycle(env: ContainerEnvProcessor, k8s: K8sAttributesProcessor) -> dict[str, dict[str, object]]:
    return _by_gpu(env.process(k8s.process((gpu(UUID_A, 0), gpu(UUID_B, 1)))))


async def _catches_up(
    kubelet: FakeKubelet, env: ContainerEnvProcessor, k8s: K8sAttributesProcessor, name: str
) -> None:
    """The kubelet's answer moves the pair to GPU B: the new pod's labels come, there only."""
    kubelet.set_pods(pod("ml", name, container("trainer", {GPU: [UUID_B]})))
    await wait_for(lambda: semconv.K8S_POD_NAME in _cycle(env, k8s)[UUID_B], 10.0)
    await env.refresh()  # a listing that began after the kubelet listed the new pair
    seen = _cycle(env, k8s)
    assert seen[UUID_B][TEAM] == "new-team"
    assert TEAM not in seen[UUID_A] and semconv.K8S_POD_NAME not in seen[UUID_A]


async def test_a_stale_kubelet_lends_no_recreated_pods_labels_to_the_old_gpu(
    containerd: Containerd, kubelet: FakeKubelet, telemetry: SelfTelemetry
) -> None:
    old = Pod("ml", "stateful-0", uid="uid-old")
    new = Pod("ml", "stateful-0", uid="uid-new")
    _run(containerd.socket, old, "old-team")
    kubelet.set_allocatable({GPU: [UUID_A, UUID_B]})
    kubelet.set_pods(pod("ml", "stateful-0", container("trainer", {GPU: [UUID_A]})))
    env, k8s = _processors(containerd, kubelet, telemetry)
    await env.start(FakeHost(telemetry))
    await k8s.start(FakeHost(telemetry))
    try:
        await _answers(kubelet, kubelet.count("GetAllocatableResources") + 1)
        assert _cycle(env, k8s)[UUID_A][TEAM] == "old-team"
        # StatefulSet: the pod is deleted and created again under its name, on GPU B; the
        # pod-resources answer still lists the name on GPU A.
        stop_pod(containerd.socket, old, "trainer")
        _run(containerd.socket, new, "new-team")
        await env.refresh()
        await env.refresh()  # listed by two listings: the new container is not "new" any more
        await _answers(kubelet, kubelet.count("GetAllocatableResources") + 2)  # answered since
        seen = _cycle(env, k8s)
        assert seen[UUID_A][semconv.K8S_POD_NAME] == "stateful-0"
        assert TEAM not in seen[UUID_A], "the new pod's labels on the old pod's GPU"
        assert series(telemetry, UNMATCHED, processor="container_env", reason="holder_stale")
        await _catches_up(kubelet, env, k8s, "stateful-0")
    finally:
        await k8s.shutdown()
        await env.shutdown()


async def test_a_stale_first_answer_after_failures_lends_nothing(
    containerd: Containerd, kubelet: FakeKubelet, telemetry: SelfTelemetry
) -> None:
    """The kubelet refuses every request from the agent's start while containerd runs the old
    pod; the pod is recreated on GPU B; the kubelet's first answer lists the name on GPU A."""
    old = Pod("ml", "stateful-1", uid="uid-old-1")
    new = Pod("ml", "stateful-1", uid="uid-new-1")
    _run(containerd.socket, old, "old-team")
    kubelet.set_allocatable({GPU: [UUID_A, UUID_B]})
    kubelet.set_pods(pod("ml", "stateful-1", container("trainer", {GPU: [UUID_A]})))
    kubelet.fail_next(grpc.StatusCode.UNAVAILABLE, "kubelet starting", times=1_000_000)
    env, k8s = _processors(containerd, kubelet, telemetry)
    await env.start(FakeHost(telemetry))  # lists the old pod's container
    await k8s.start(FakeHost(telemetry))
    try:
        stop_pod(containerd.socket, old, "trainer")
        _run(containerd.socket, new, "new-team")
        await env.refresh()
        await env.refresh()
        kubelet.errors.clear()
        await _answers(kubelet, 2)  # the first answer, and one more
        await env.refresh()  # a listing newer than the answer: the pair is judged by uid
        seen = _cycle(env, k8s)
        assert seen[UUID_A][semconv.K8S_POD_NAME] == "stateful-1"
        assert TEAM not in seen[UUID_A], "the new pod's labels on the old pod's GPU"
        assert series(telemetry, UNMATCHED, processor="container_env", reason="holder_stale")
        await _catches_up(kubelet, env, k8s, "stateful-1")
    finally:
        await k8s.shutdown()
        await env.shutdown()
