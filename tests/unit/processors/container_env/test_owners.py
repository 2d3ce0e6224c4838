"""Workload owners from the pod's labels and name (no API server), and through the processor."""

from __future__ import annotations

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.container_env.owners import owners
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import by_id, by_workload, make_processor, one

CASES = [
    (
        "deployment",
        "trainer-7d4b9c8f6d-x2k9q",
        {"pod-template-hash": "7d4b9c8f6d", "app": "trainer"},
        {"k8s.replicaset.name": "trainer-7d4b9c8f6d", "k8s.deployment.name": "trainer"},
    ),
    (
        "deployment whose long name was cut before the hash: no guess",
        "a" * 52 + "-7d4b9c-x2k9q",
        {"pod-template-hash": "7d4b9c8f6d"},
        {},
    ),
    (
        "statefulset",
        "db-12",
        {"statefulset.kubernetes.io/pod-name": "db-12", "controller-revision-hash": "db-5c6b"},
        {"k8s.statefulset.name": "db"},
    ),
    (
        "daemonset",
        "dcgm-exporter-g4xms",
        {"controller-revision-hash": "5b547684d9", "pod-template-generation": "1"},
        {"k8s.daemonset.name": "dcgm-exporter"},
    ),
    (
        "job (1.27+ label)",
        "train-abcde",
        {"batch.kubernetes.io/job-name": "train", "job-name": "train"},
        {"k8s.job.name": "train"},
    ),
    ("job (legacy label only)", "train-abcde", {"job-name": "train"}, {"k8s.job.name": "train"}),
    (
        "cronjob: job named <cronjob>-<minutes since the epoch>",
        "nightly-28948930-q7z5m",
        {"batch.kubernetes.io/job-name": "nightly-28948930"},
        {"k8s.job.name": "nightly-28948930", "k8s.cronjob.name": "nightly"},
    ),
    (
        "a job with a short number is no cronjob's",
        "run-42-q7z5m",
        {"job-name": "run-42"},
        {"k8s.job.name": "run-42"},
    ),
    (
        "jobset (its jobs are jobs, never a cronjob's)",
        "llm-workers-0-3-abcde",
        {
            "jobset.sigs.k8s.io/jobset-name": "llm",
            "batch.kubernetes.io/job-name": "llm-workers-0",
            "kueue.x-k8s.io/queue-name": "team-a",
        },
        {"k8s.jobset.name": "llm", "k8s.job.name": "llm-workers-0", "kueue.queue.name": "team-a"},
    ),
    (
        "kueue: the local queue label wins over the user's queue-name",
        "p",
        {
            "kueue.x-k8s.io/queue-name": "asked",
            "kueue.x-k8s.io/local-queue-name": "admitted",
            "kueue.x-k8s.io/cluster-queue-name": "gpu-cq",
        },
        {"kueue.queue.name": "admitted", "kueue.cluster_queue.name": "gpu-cq"},
    ),
    (
        "ray worker",
        "raycluster-a-gpu-group-worker-abcde",
        {"ray.io/cluster": "raycluster-a", "ray.io/node-type": "worker", "ray.io/group": "gpu"},
        {"ray.cluster.name": "raycluster-a", "ray.node.type": "worker"},
    ),
    (
        "leaderworkerset leader (also a statefulset's pod)",
        "vllm-0",
        {
            "leaderworkerset.sigs.k8s.io/name": "vllm",
            "statefulset.kubernetes.io/pod-name": "vllm-0",
        },
        {"k8s.leaderworkerset.name": "vllm", "k8s.statefulset.name": "vllm"},
    ),
    ("bare pod", "debug", {"app": "debug"}, {}),
]


@pytest.mark.parametrize(
    ("pod", "labels", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_owners(pod: str, labels: dict[str, str], expected: dict[str, str]) -> None:
    assert owners(pod, labels) == expected


def test_an_owner_read_from_a_label_is_kept_to_a_kubernetes_name_of_253_characters() -> None:
    """A label value is at most 63 characters in Kubernetes, but the runtime shows whatever
    was written: an owner is never longer than a Kubernetes object name can be."""
    found = owners("p", {"jobset.sigs.k8s.io/jobset-name": "j" * 300, "job-name": "k" * 253})
    assert found["k8s.jobset.name"] == "j" * 253
    assert found["k8s.job.name"] == "k" * 253


def test_a_hash_that_is_not_its_own_dash_separated_part_names_no_deployment() -> None:
    # the name ends in the hash, but glued to the word before it: no ReplicaSet made this name
    assert owners("trainer7d4b9c8f6d-x2k9q", {"pod-template-hash": "7d4b9c8f6d"}) == {}


def test_the_deployment_is_the_replicaset_name_without_its_dash_and_hash() -> None:
    got = owners("my-app-2-7d4b9c8f6d-x2k9q", {"pod-template-hash": "7d4b9c8f6d"})
    assert got == {
        "k8s.replicaset.name": "my-app-2-7d4b9c8f6d",
        "k8s.deployment.name": "my-app-2",
    }


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({"controller-revision-hash": "5b547684d9"}, id="revision hash only"),
        pytest.param({"pod-template-generation": "1"}, id="template generation only"),
    ],
)
def test_one_of_the_two_daemonset_labels_alone_names_no_daemonset(labels: dict[str, str]) -> None:
    # e.g. a pod of another revision-tracking controller (a CloneSet's) carries only the hash
    assert owners("web-g4xms", labels) == {}


CID, SID = "c" * 64, "s" * 64
POD = "trainer-7d4b9c8f6d-x2k9q"


def _node() -> FakeRuntime:
    rt = FakeRuntime()
    rt.sandbox(SID, "ml", POD, labels={"pod-template-hash": "7d4b9c8f6d", "secret": "x"})
    rt.workload(CID, "ml", POD, "trainer", sandbox_id=SID)
    return rt


async def test_owners_reach_gpu_and_process_series_by_default(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc = make_processor(telemetry, [(_node(), True)], clock, max_attributes=1)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    try:
        for rm in (by_workload("ml", POD, "trainer"), by_id(CID)):
            got = one(proc.process((rm,)))
            assert got["k8s.deployment.name"] == "trainer"
            assert got["k8s.replicaset.name"] == "trainer-7d4b9c8f6d"
            # Owners need no pod_labels include, and export no other pod label.
            assert not any(key.startswith("k8s.pod.label.") for key in got)
    finally:
        await proc.shutdown()


async def test_owners_false_adds_none(telemetry: SelfTelemetry, clock: FakeClock) -> None:
    proc = make_processor(telemetry, [(_node(), True)], clock, owners=False)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    try:
        got = one(proc.process((by_workload("ml", POD, "trainer"),)))
        assert "k8s.deployment.name" not in got
    finally:
        await proc.shutdown()


async def test_an_owner_already_on_the_series_is_kept(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc = make_processor(telemetry, [(_node(), True)], clock)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    try:
        rm = by_workload("ml", POD, "trainer")
        rm = type(rm)(
            resource={**rm.resource, "k8s.deployment.name": "from-upstream"}, metrics=rm.metrics
        )
        assert one(proc.process((rm,)))["k8s.deployment.name"] == "from-upstream"
    finally:
        await proc.shutdown()
