"""container_env against a real containerd (PEERS.md): CRI-shaped records over the containers API.

One private containerd for the module; each test writes its own pods (distinct names), and the
processor is refreshed explicitly (its own loop runs on a clock that never moves), so every
assertion is about one refresh of the real daemon, not about timing.
"""

from __future__ import annotations

import logging
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.factory import runtimes_for
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.peers.cri_records import (
    Pod,
    create_container,
    create_record,
    create_sandbox,
    replace_spec,
    stop,
    stop_pod,
)
from tests.peers.runtime import Containerd
from tests.unit.processors.container_env.helpers import by_id, by_workload, counter, one

pytestmark = pytest.mark.integration


async def _processor(
    telemetry: SelfTelemetry, socket: Path, **options: Any
) -> ContainerEnvProcessor:
    config = ContainerEnvProcessorConfig.model_validate(
        {"runtime": "containerd", "containerd": {"socket": str(socket)}, **options}
    )
    settings = make_settings("container_env", Kind.PROCESSOR, telemetry)
    proc = ContainerEnvProcessor(settings, config, runtimes_for, clock=FakeClock())
    await proc.start(FakeHost(telemetry))
    await proc.refresh()
    return proc


async def test_labels_env_pod_labels_and_annotations(
    containerd: Containerd, telemetry: SelfTelemetry
) -> None:
    pod = Pod(
        "ml",
        "train-a",
        labels={"team": "vision", "tier": "gold"},
        annotations={"owner": "alice", "note": "x"},
    )
    create_sandbox(containerd.socket, pod)
    cid = create_container(
        containerd.socket,
        pod,
        "trainer",
        env={"TEAM": "ml", "MLFLOW_RUN_ID": "run-7", "HOME": "/root", "HF_TOKEN": "canary-1"},
        labels={"app.kubernetes.io/name": "trainer", "other": "no"},
    )
    proc = await _processor(
        telemetry,
        containerd.socket,
        env={"include": ["TEAM", "MLFLOW_*", "HF_TOKEN"]},
        labels={"include": ["app.kubernetes.io/*"]},
        pod_labels={"include": ["team"]},
        annotations={"include": ["owner"]},
    )
    expected = {
        "container.env.TEAM": "ml",
        "container.env.MLFLOW_RUN_ID": "run-7",
        "container.label.app.kubernetes.io/name": "trainer",
        "k8s.pod.label.team": "vision",
        "k8s.pod.annotation.owner": "alice",
    }
    named = one(proc.process((by_workload("ml", "train-a", "trainer"),)))
    assert {
        k: v for k, v in named.items() if k.startswith(("container.", "k8s.pod.l", "k8s.pod.a"))
    } == expected
    by_container_id = one(proc.process((by_id(cid),)))
    assert expected.items() <= by_container_id.items()
    assert by_container_id["k8s.pod.name"] == "train-a"
    assert by_container_id["k8s.container.name"] == "trainer"
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
    assert counter(telemetry, "otelgpu_container_env_refused_keys_total", section="env") == 1
    await proc.shutdown()


async def test_pause_container_is_never_a_workload(
    containerd: Containerd, telemetry: SelfTelemetry
) -> None:
    pod = Pod("ml", "train-b", labels={"team": "b"})
    sandbox = create_sandbox(containerd.socket, pod)
    proc = await _processor(telemetry, containerd.socket, pod_labels={"include": ["team"]})
    pause = by_id(sandbox)
    assert proc.process((pause,)) == (pause,)
    named = by_workload("ml", "train-b", "POD")
    assert proc.process((named,)) == (named,)
    assert (
        counter(
            telemetry, "otelgpu_enrichment_unmatched_points_total", reason="container_not_found"
        )
        == 4
    )
    await proc.shutdown()


async def test_other_containerd_namespaces_are_not_read(
    containerd: Containerd, telemetry: SelfTelemetry
) -> None:
    labels = {"io.cri-containerd.kind": "container", "team": "moby"}
    moby_id = "moby-" + uuid.uuid4().hex
    create_record(containerd.socket, moby_id, labels, namespace="moby", running=True)
    try:
        create_record(containerd.socket, "k8s-" + moby_id, labels, running=True)
        proc = await _processor(telemetry, containerd.socket, labels={"include": ["team"]})
        outside, inside = by_id(moby_id), by_id("k8s-" + moby_id)
        assert proc.process((outside,)) == (outside,)
        assert one(proc.process((inside,)))["container.label.team"] == "moby"
        await proc.shutdown()
    finally:
        stop(containerd.socket, moby_id, namespace="moby")  # the daemon cleans k8s.io only


async def test_malformed_spec_is_counted_not_fatal(
    containerd: Containerd, telemetry: SelfTelemetry
) -> None:
    labels = {"io.cri-containerd.kind": "container", "team": "odd"}
    cid = "bad-" + uuid.uuid4().hex
    create_record(containerd.socket, cid, labels, running=True)
    replace_spec(containerd.socket, cid, b'{"process": {"env": 42}}')  # runs on, reads malformed
    try:
        proc = await _processor(telemetry, containerd.socket, labels={"include": ["team"]})
        assert one(proc.process((by_id(cid),)))["container.label.team"] == "odd"
        assert counter(telemetry, "otelgpu_container_env_invalid_records_total") == 1
        await proc.shutdown()
    finally:
        stop(containerd.socket, cid)  # other tests count malformed records too


async def test_stopped_containers_are_never_read(
    containerd: Containerd, telemetry: SelfTelemetry
) -> None:
    """A record without a running task (created, never started; or exited) labels nothing,
    and its malformed spec is not even decoded."""
    labels = {"io.cri-containerd.kind": "container", "team": "gone"}
    never, exited = "never-" + uuid.uuid4().hex, "exited-" + uuid.uuid4().hex
    create_record(containerd.socket, never, labels, raw_spec=b'{"process": {"env": 42}}')
    create_record(containerd.socket, exited, labels, running=True)
    stop(containerd.socket, exited)
    proc = await _processor(telemetry, containerd.socket, labels={"include": ["team"]})
    for cid in (never, exited):
        assert proc.process((by_id(cid),)) == (by_id(cid),)
    assert counter(telemetry, "otelgpu_container_env_invalid_records_total") == 0
    await proc.shutdown()


async def test_s1_ten_thousand_env_entries_with_canaries(
    containerd: Containerd, telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """S1 on a containerd record: only included keys leave; canary values appear nowhere."""
    caplog.set_level(logging.DEBUG)
    rng = random.Random(7)
    canaries = [f"CANARY-{uuid.uuid4().hex}" for _ in range(6)]
    env = {f"R{rng.getrandbits(48):012x}": f"v{rng.getrandbits(32):08x}" for _ in range(10_000)}
    env.update(
        {
            "TEAM": "ml",
            "PROJECT": "p1",
            "HF_TOKEN": canaries[0],
            "DB_PASSWORD": canaries[1],
            "AWS_SECRET_ACCESS_KEY": canaries[2],
            "api_key": canaries[3],
            "RANDOM_NOISE": canaries[4],
            "GIT_CREDENTIALS": canaries[5],
        }
    )
    pod = Pod("ml", "s1-pod")
    create_sandbox(containerd.socket, pod)
    cid = create_container(containerd.socket, pod, "main", env=env)
    proc = await _processor(
        telemetry,
        containerd.socket,
        env={
            "include": [
                "TEAM",
                "PROJECT",
                "*TOKEN*",
                "*PASSWORD*",
                "*SECRET*",
                "api_*",
                "*CREDENTIAL*",
            ]
        },
    )
    out = proc.process((by_id(cid), by_workload("ml", "s1-pod", "main")))
    for rm in out:
        exported = {k: v for k, v in rm.resource.items() if k.startswith("container.env.")}
        assert exported == {"container.env.TEAM": "ml", "container.env.PROJECT": "p1"}
    rendered = repr(out) + caplog.text
    assert [c for c in canaries if c in rendered] == []
    # Five here, and any other test's container in this containerd with a secret-like key.
    assert counter(telemetry, "otelgpu_container_env_refused_keys_total", section="env") >= 5
    await proc.shutdown()


def _business(rm_resource: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in rm_resource.items() if k.startswith(("container.env.", "k8s.pod.l"))}


async def test_recreated_pod_never_borrows_the_dead_pods_labels(
    containerd: Containerd, telemetry: SelfTelemetry
) -> None:
    """No borrowed labels: ml/train-0 is deleted and created again under the same
    namespace, pod and container names. The dead pod's records are still in containerd
    (the kubelet removes them later), and the new pod's sandbox is ready before its
    container exists (image pull): the new pod must carry no labels until its own
    container runs, and then only its own."""
    old = Pod("ml", "train-0", uid="uid-old", labels={"team": "old"})
    create_sandbox(containerd.socket, old)
    old_cid = create_container(containerd.socket, old, "trainer", env={"TEAM": "old"})
    proc = await _processor(
        telemetry,
        containerd.socket,
        env={"include": ["TEAM"]},
        pod_labels={"include": ["team"]},
    )
    named = by_workload("ml", "train-0", "trainer")
    old_labels = {"container.env.TEAM": "old", "k8s.pod.label.team": "old"}
    assert _business(one(proc.process((named,)))) == old_labels

    stop_pod(containerd.socket, old, "trainer")  # deleted: tasks gone, records kept
    new = Pod("ml", "train-0", uid="uid-new", labels={"team": "new"})
    create_sandbox(containerd.socket, new)
    await proc.refresh()
    assert _business(one(proc.process((named,)))) == {}
    assert _business(one(proc.process((by_id(old_cid),)))) == {}

    new_cid = create_container(containerd.socket, new, "trainer", env={"TEAM": "new"})
    await proc.refresh()
    new_labels = {"container.env.TEAM": "new", "k8s.pod.label.team": "new"}
    assert _business(one(proc.process((named,)))) == new_labels
    assert _business(one(proc.process((by_id(new_cid),)))) == new_labels
    assert _business(one(proc.process((by_id(old_cid),)))) == {}
    await proc.shutdown()
