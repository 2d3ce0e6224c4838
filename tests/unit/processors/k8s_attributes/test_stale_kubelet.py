"""A pod deleted and created again under its name while the kubelet's answer lags the runtime:
k8s_attributes then container_env, on one clock, against a scripted kubelet and runtime.

The kubelet names pods, not pod uids. Its answer still lists the old pod's GPU under the name
after the runtime already runs the new pod (new uid, another GPU): the new pod's business
labels must never go on the old pod's GPU, and come once what the kubelet lists for the pod
changes."""

from __future__ import annotations

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import Batch
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.k8s_attributes.pod_resources import PodResourcesError
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import make_processor as make_container_env
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    UUID_B,
    FakePodResources,
    allocatable,
    container,
    gpu,
    make_processor,
    pod,
    series,
)

UNMATCHED = "otelgpu_enrichment_unmatched_points_total"
TEAM = "container.env.TEAM"
OLD_SANDBOX, NEW_SANDBOX = "s" * 64, "t" * 64
OLD_CID, NEW_CID = "a" * 64, "b" * 64


def _run(rt: FakeRuntime, sandbox: str, cid: str, uid: str, team: str, created: float) -> None:
    rt.sandbox(sandbox, "ml", "train-0", created=created, uid=uid)
    rt.workload(cid, "ml", "train-0", "trainer", sandbox_id=sandbox, env={"TEAM": team}, uid=uid)


class _Node:
    """The two processors of a pipeline, the kubelet and the runtime they ask."""

    def __init__(self, telemetry: SelfTelemetry, clock: FakeClock) -> None:
        self.clock = clock
        self.kubelet = FakePodResources()
        self.kubelet.devices = allocatable({GPU: [UUID_A, UUID_B]})
        self.runtime = FakeRuntime()
        self.k8s = make_processor(telemetry, self.kubelet, clock, refresh_interval="1s")
        self.env: ContainerEnvProcessor = make_container_env(
            telemetry,
            [(self.runtime, True)],
            clock=clock,
            env={"include": ["TEAM"]},
            refresh_interval="1s",
        )

    def lists(self, uuid: str) -> None:
        self.kubelet.set(pod("ml", "train-0", container("trainer", {GPU: [uuid]})))

    async def start(self, telemetry: SelfTelemetry) -> None:
        await self.env.start(FakeHost(telemetry))  # as the service starts them: last first
        await self.k8s.start(FakeHost(telemetry))
        await self.clock.advance(0)

    def cycle(self) -> dict[str, dict[str, object]]:
        batch: Batch = (gpu(UUID_A, 0), gpu(UUID_B, 1))
        out = self.env.process(self.k8s.process(batch))
        return {str(rm.resource[semconv.HW_ID]): dict(rm.resource) for rm in out if rm.metrics}

    async def shutdown(self) -> None:
        await self.k8s.shutdown()
        await self.env.shutdown()


async def test_a_stale_kubelet_lends_no_recreated_pods_labels_to_the_old_gpu(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    node = _Node(telemetry, clock)
    _run(node.runtime, OLD_SANDBOX, OLD_CID, "uid-old", "old-team", 1.0)
    node.lists(UUID_A)
    await node.start(telemetry)
    await clock.advance(2)
    assert node.cycle()[UUID_A][TEAM] == "old-team"
    # Recreated under its name on GPU B; the kubelet answers on time but still lists GPU A.
    node.runtime.stop(OLD_CID)
    node.runtime.stop(OLD_SANDBOX)
    _run(node.runtime, NEW_SANDBOX, NEW_CID, "uid-new", "new-team", 5.0)
    for _ in range(5):  # both refresh loops run several times: the kubelet keeps answering
        await clock.advance(1)
        seen = node.cycle()
        assert seen[UUID_A][semconv.K8S_POD_NAME] == "train-0"  # the old pod's pair
        assert TEAM not in seen[UUID_A], "the new pod's labels on the old pod's GPU"
    assert series(telemetry, UNMATCHED, processor="container_env", reason="holder_stale")
    # The kubelet's answer catches up: the pair moves to GPU B, with the new pod's labels.
    node.lists(UUID_B)
    await clock.advance(1)
    seen = node.cycle()
    assert TEAM not in seen[UUID_A] and semconv.K8S_POD_NAME not in seen[UUID_A]
    assert seen[UUID_B][TEAM] == "new-team"
    await node.shutdown()


async def test_a_stale_first_answer_after_failures_lends_nothing(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """The kubelet fails from the agent's start while the runtime runs the old pod, which is
    then recreated on GPU B; the kubelet's first answer, late and stale, lists the name on GPU
    A. The agent never saw that pair before, but that says nothing of how long the kubelet has
    listed it: it may be the old pod's, whose container the runtime listed."""
    node = _Node(telemetry, clock)
    _run(node.runtime, OLD_SANDBOX, OLD_CID, "uid-old", "old-team", 1.0)
    node.kubelet.error = PodResourcesError("UNAVAILABLE", "kubelet restarting")
    await node.start(telemetry)
    await clock.advance(2)  # container_env lists the old pod's container
    node.runtime.stop(OLD_CID)
    node.runtime.stop(OLD_SANDBOX)
    _run(node.runtime, NEW_SANDBOX, NEW_CID, "uid-new", "new-team", 5.0)
    await clock.advance(2)
    node.kubelet.error = None
    node.lists(UUID_A)
    for _ in range(5):
        await clock.advance(1)
        seen = node.cycle()
        assert seen[UUID_A][semconv.K8S_POD_NAME] == "train-0"
        assert TEAM not in seen[UUID_A], "the new pod's labels on the old pod's GPU"
    node.lists(UUID_B)  # caught up
    await clock.advance(1)
    seen = node.cycle()
    assert TEAM not in seen[UUID_A]
    assert seen[UUID_B][TEAM] == "new-team"
    await node.shutdown()


async def test_a_stale_answer_that_changes_elsewhere_still_lends_nothing(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """A lagging kubelet may list new pods while it still lists the recreated pod's name on
    the old GPU: only a change in what it lists for that pod says it has caught up."""
    node = _Node(telemetry, clock)
    _run(node.runtime, OLD_SANDBOX, OLD_CID, "uid-old", "old-team", 1.0)
    node.lists(UUID_A)
    await node.start(telemetry)
    await clock.advance(2)
    node.runtime.stop(OLD_CID)
    node.runtime.stop(OLD_SANDBOX)
    _run(node.runtime, NEW_SANDBOX, NEW_CID, "uid-new", "new-team", 5.0)
    await clock.advance(2)
    node.kubelet.set(*node.kubelet.pods, pod("ml", "serve-0", container("server", {GPU: [UUID_B]})))
    await clock.advance(2)
    assert TEAM not in node.cycle()[UUID_A]
    await node.shutdown()


async def test_a_recreated_pod_on_its_old_gpu_is_labelled_once_its_listing_changes(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Same GPU, same device ID: the kubelet lists both pods alike, so which one it means
    cannot be told until what it lists for the pod changes (here: a second container)."""
    node = _Node(telemetry, clock)
    _run(node.runtime, OLD_SANDBOX, OLD_CID, "uid-old", "old-team", 1.0)
    node.lists(UUID_A)
    await node.start(telemetry)
    await clock.advance(2)
    node.runtime.stop(OLD_CID)
    node.runtime.stop(OLD_SANDBOX)
    _run(node.runtime, NEW_SANDBOX, NEW_CID, "uid-new", "new-team", 5.0)
    await clock.advance(2)
    assert TEAM not in node.cycle()[UUID_A]
    node.kubelet.set(
        pod("ml", "train-0", container("trainer", {GPU: [UUID_A]}), container("sidecar"))
    )
    await clock.advance(1)
    assert node.cycle()[UUID_A][TEAM] == "new-team"
    await node.shutdown()


async def test_a_new_pod_under_a_fresh_name_is_labelled_without_waiting(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """No other pod uid was ever listed under the name: nothing to wait for."""
    node = _Node(telemetry, clock)
    await node.start(telemetry)
    node.lists(UUID_A)
    await clock.advance(1)
    _run(node.runtime, NEW_SANDBOX, NEW_CID, "uid-new", "new-team", 5.0)
    await clock.advance(2)
    assert node.cycle()[UUID_A][TEAM] == "new-team"
    await node.shutdown()


async def test_since_when_the_kubelet_lists_the_pod_so_is_noted_on_labelled_resources(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    node = _Node(telemetry, clock)
    node.lists(UUID_A)
    await node.start(telemetry)
    (device, allocation) = node.k8s.process((gpu(UUID_A, 0),))
    assert device.notes[notes.HOLDERS_CHANGED] == float("-inf")  # the first answer
    assert allocation.notes[notes.HOLDERS_CHANGED] == float("-inf")
    other = pod("ml", "serve-0", container("server", {GPU: [UUID_B]}))
    node.kubelet.set(*node.kubelet.pods, other)
    await clock.advance(3)  # the answer changed, not what it lists for train-0
    assert node.k8s.process((gpu(UUID_A, 0),))[0].notes[notes.HOLDERS_CHANGED] == float("-inf")
    node.kubelet.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_B]})), other)
    await clock.advance(1)
    changed = clock.now
    node.kubelet.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})), other)
    await clock.advance(1)
    (device, allocation, _) = node.k8s.process((gpu(UUID_A, 0), gpu(UUID_B, 1)))[:3]
    assert device.notes[notes.HOLDERS_CHANGED] == allocation.notes[notes.HOLDERS_CHANGED]
    assert device.notes[notes.HOLDERS_CHANGED] > changed
    await node.shutdown()
