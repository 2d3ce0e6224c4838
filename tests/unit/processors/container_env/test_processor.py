"""The processor over an in-memory runtime: matching, refresh, runtime loss and return."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from otelgpu.telemetry import SelfTelemetry
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import (
    by_id,
    by_workload,
    counter,
    gpu,
    make_processor,
    one,
)

UNMATCHED = "otelgpu_enrichment_unmatched_points_total"
CID = "c" * 64
SID = "s" * 64
FILTERS = {
    "env": {"include": ["TEAM", "MLFLOW_*"], "exclude": ["MLFLOW_SKIP"]},
    "labels": {"include": ["app.kubernetes.io/*"]},
    "pod_labels": {"include": ["team", "io.kubernetes.pod.name"]},
    "annotations": {"include": ["owner"]},
}


def _node() -> FakeRuntime:
    rt = FakeRuntime()
    rt.sandbox(
        SID,
        "ml",
        "train-0",
        labels={"team": "vision", "tier": "x"},
        annotations={"owner": "alice", "other": "y"},
    )
    rt.workload(
        CID,
        "ml",
        "train-0",
        "trainer",
        sandbox_id=SID,
        env={"TEAM": "ml", "MLFLOW_RUN_ID": "r1", "MLFLOW_SKIP": "no", "HOME": "/root"},
        labels={"app.kubernetes.io/name": "trainer", "unrelated": "z"},
    )
    return rt


EXPECTED = {
    "container.env.TEAM": "ml",
    "container.env.MLFLOW_RUN_ID": "r1",
    "container.label.app.kubernetes.io/name": "trainer",
    "k8s.pod.label.team": "vision",
    "k8s.pod.label.io.kubernetes.pod.name": "train-0",
    "k8s.pod.annotation.owner": "alice",
}


async def _started(telemetry: SelfTelemetry, rt: FakeRuntime, clock: FakeClock, **opts: object):
    proc = make_processor(telemetry, [(rt, True)], clock, **{**FILTERS, **opts})
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    return proc


async def test_matches_by_namespace_pod_container(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc = await _started(telemetry, _node(), clock)
    resource = one(proc.process((by_workload("ml", "train-0", "trainer"),)))
    assert {k: v for k, v in resource.items() if k not in ("hw.id", "hw.type")} == {
        "k8s.namespace.name": "ml",
        "k8s.pod.name": "train-0",
        "k8s.container.name": "trainer",
        **EXPECTED,
    }
    await proc.shutdown()


async def test_matches_by_container_id_and_fills_in_k8s_names(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc = await _started(telemetry, _node(), clock)
    resource = one(proc.process((by_id(CID),)))
    assert resource["k8s.namespace.name"] == "ml"
    assert resource["k8s.pod.name"] == "train-0"
    assert resource["k8s.container.name"] == "trainer"
    assert EXPECTED.items() <= resource.items()
    await proc.shutdown()


async def test_never_overwrites_existing_attributes(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc = await _started(telemetry, _node(), clock)
    rm = gpu(**{"container.id": CID, "k8s.pod.name": "from-kubelet", "container.env.TEAM": "kept"})
    resource = one(proc.process((rm,)))
    assert resource["k8s.pod.name"] == "from-kubelet"
    assert resource["container.env.TEAM"] == "kept"
    assert resource["container.env.MLFLOW_RUN_ID"] == "r1"
    await proc.shutdown()


async def test_never_matches_by_pod_alone(telemetry: SelfTelemetry, clock: FakeClock) -> None:
    proc = await _started(telemetry, _node(), clock)
    rm = gpu(3, **{"k8s.namespace.name": "ml", "k8s.pod.name": "train-0"})
    assert proc.process((rm,)) == (rm,)
    assert counter(telemetry, UNMATCHED, reason="no_container") == 3
    await proc.shutdown()


async def test_a_gpu_nobody_holds_passes_uncounted(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc = await _started(telemetry, _node(), clock)
    rm = gpu()
    assert proc.process((rm,)) == (rm,)
    assert counter(telemetry, UNMATCHED) == 0
    await proc.shutdown()


async def test_sandbox_is_never_a_match_target(telemetry: SelfTelemetry, clock: FakeClock) -> None:
    proc = await _started(telemetry, _node(), clock)
    pause = by_id(SID)
    assert proc.process((pause,)) == (pause,)
    assert proc.process((by_workload("ml", "train-0", "POD"),))[0].resource.keys() == {
        "hw.id",
        "hw.type",
        "k8s.namespace.name",
        "k8s.pod.name",
        "k8s.container.name",
    }
    assert counter(telemetry, UNMATCHED, reason="container_not_found") == 4
    await proc.shutdown()


async def test_unknown_container_triggers_one_early_refresh(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    assert rt.list_calls == 1
    rt.sandbox("m" * 64, "ml", "train-1")
    rt.workload("n" * 64, "ml", "train-1", "trainer", env={"TEAM": "new"})
    assert "container.env.TEAM" not in one(proc.process((by_id("n" * 64),)))
    await clock.advance(1.0)  # early, well before the 10s interval
    assert rt.list_calls == 2
    assert one(proc.process((by_id("n" * 64),)))["container.env.TEAM"] == "new"
    proc.process((by_id("x" * 64),))
    await clock.advance(1.0)
    assert rt.list_calls == 3
    proc.process((by_id("x" * 64),))  # still unknown: no further early refresh for it
    await clock.advance(5.0)
    assert rt.list_calls == 3
    await clock.advance(5.0)
    assert rt.list_calls == 4
    await proc.shutdown()


async def test_runtime_loss_keeps_labels_reports_down_and_recovers(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _node()
    proc = await _started(telemetry, rt, clock, refresh_interval="2s")
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
    rm = by_workload("ml", "train-0", "trainer", points=5)
    assert EXPECTED.items() <= one(proc.process((rm,))).items()
    rt.up = False
    await clock.advance(2.0)
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 0
    assert EXPECTED.items() <= one(proc.process((rm,))).items()  # the last good snapshot
    assert counter(telemetry, UNMATCHED) == 0
    rt.up = True
    await clock.advance(2.0)
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
    assert EXPECTED.items() <= one(proc.process((rm,))).items()
    await proc.shutdown()


async def test_expected_runtime_reads_down_until_it_answers(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime("docker")
    rt.up = False
    proc = make_processor(telemetry, [(rt, True)], clock)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    assert telemetry.sources["docker"].up is False
    assert telemetry.sources_not_ready() == ["docker: connection refused"]
    await proc.shutdown()


async def test_auto_probes_quietly_then_logs_the_runtime_it_found(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    containerd, docker = FakeRuntime("containerd"), FakeRuntime("docker")
    containerd.up = docker.up = False
    docker.add("d" * 64, {"team": "a"})
    proc = make_processor(
        telemetry, [(containerd, False), (docker, False)], clock, labels={"include": ["team"]}
    )
    caplog.set_level(logging.INFO)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    assert telemetry.sources == {}  # nothing to report before anything answers
    assert "no container runtime answered yet" in caplog.text
    rm = by_id("d" * 64)
    assert proc.process((rm,)) == (rm,)
    assert counter(telemetry, UNMATCHED, reason="runtime_down") == 2
    docker.up = True
    await clock.advance(10.0)
    assert "found container runtime docker at /fake/docker.sock" in caplog.text
    assert list(telemetry.sources) == ["docker"]
    assert one(proc.process((rm,)))["container.label.team"] == "a"
    await proc.shutdown()


async def test_auto_merges_every_runtime_that_answers(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    containerd, docker = _node(), FakeRuntime("docker")
    docker.add("d" * 64, {"app.kubernetes.io/name": "plain"})
    proc = make_processor(telemetry, [(containerd, False), (docker, False)], clock, **FILTERS)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    out = proc.process((by_id("d" * 64), by_id(CID)))
    assert out[0].resource["container.label.app.kubernetes.io/name"] == "plain"
    assert out[1].resource["container.env.TEAM"] == "ml"
    await proc.shutdown()


async def test_newest_record_wins_for_a_restarted_container(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.sandbox("s" * 64, "ml", "p")
    rt.workload("a" * 64, "ml", "p", "c", env={"TEAM": "old"}, created=1.0)
    rt.workload("b" * 64, "ml", "p", "c", env={"TEAM": "new"}, created=2.0)
    proc = await _started(telemetry, rt, clock)
    assert one(proc.process((by_workload("ml", "p", "c"),)))["container.env.TEAM"] == "new"
    await proc.shutdown()


async def test_shutdown_is_idempotent_and_clears_the_snapshot(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    await proc.shutdown()
    await proc.shutdown()
    assert rt.closed >= 1
    rm = by_id(CID)
    assert proc.process((rm,)) == (rm,)


async def test_process_before_start_passes_batches_through(telemetry: SelfTelemetry) -> None:
    proc = make_processor(telemetry, [(_node(), True)])
    rm = by_id(CID)
    assert proc.process((rm,)) == (rm,)
    await proc.shutdown()


async def test_a_pod_recreated_on_another_gpu_never_borrows_the_old_pods_labels(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """R5/R10 (seen in the node e2e under load): train-0 is deleted and created again under
    its name on another GPU; the kubelet says so before the runtime is listed again, and the
    snapshot still holds the old, running container. Its TEAM must not go on the new GPU:
    absent until a listing that began after the move, then the new pod's. (The receiver
    reports every GPU: the old one too, now held by nobody.)"""
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    on_gpu0 = by_workload("ml", "train-0", "trainer")
    assert one(proc.process((on_gpu0,)))["container.env.TEAM"] == "ml"
    moved = replace(on_gpu0, resource={**on_gpu0.resource, "hw.id": "GPU-3"})
    idle = gpu()  # GPU-0, still reported, held by nobody now
    calls = rt.list_calls
    out = proc.process((idle, moved))
    assert "container.env.TEAM" not in out[1].resource  # the old snapshot's
    assert counter(telemetry, UNMATCHED, reason="holder_changed") == 2
    rt.stop(CID)
    rt.sandbox("t" * 64, "ml", "train-0", created=5.0)
    rt.workload("d" * 64, "ml", "train-0", "trainer", sandbox_id="t" * 64, env={"TEAM": "new"})
    await clock.advance(1.0)  # the early refresh the move asked for
    assert rt.list_calls == calls + 1
    assert proc.process((idle, moved))[1].resource["container.env.TEAM"] == "new"
    assert proc.process((idle, moved))[1].resource["container.env.TEAM"] == "new"  # steady
    await proc.shutdown()


async def test_a_container_holding_two_gpus_gets_its_labels_on_both(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """One container on GPU-0 and GPU-1 is one holder of two devices, not a holder moving
    between them on every lookup (which left it unlabelled, counted as holder_changed)."""
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    on_gpu0 = by_workload("ml", "train-0", "trainer")
    on_gpu1 = replace(on_gpu0, resource={**on_gpu0.resource, "hw.id": "GPU-1"})
    for _ in range(3):
        out = proc.process((on_gpu0, on_gpu1))
        assert [rm.resource.get("container.env.TEAM") for rm in out] == ["ml", "ml"]
        await clock.advance(10.0)
    assert counter(telemetry, UNMATCHED, reason="holder_changed") == 0
    await proc.shutdown()


async def test_a_pod_recreated_on_a_subset_of_its_gpus_is_a_move_too(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """A container's devices are fixed for its life: the same name on another set of GPUs
    (here one of its two) is a new pod, whose labels wait for a listing after the move."""
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    on_gpu0 = by_workload("ml", "train-0", "trainer")
    on_gpu1 = replace(on_gpu0, resource={**on_gpu0.resource, "hw.id": "GPU-1"})
    assert [rm.resource.get("container.env.TEAM") for rm in proc.process((on_gpu0, on_gpu1))] == [
        "ml",
        "ml",
    ]
    idle = gpu()  # GPU-0 still reports, held by nobody
    assert "container.env.TEAM" not in proc.process((idle, on_gpu1))[1].resource
    assert counter(telemetry, UNMATCHED, reason="holder_changed") == 2
    await clock.advance(1.0)  # the early refresh the move asked for
    assert proc.process((idle, on_gpu1))[1].resource["container.env.TEAM"] == "ml"
    await proc.shutdown()


async def test_a_name_first_seen_while_the_runtime_is_down_waits_for_it(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """During an outage the snapshot may be older than a pod recreated under its name: a name
    first seen then (here the recreated pod's sidecar now holds the GPU) must not get the
    deleted pod's container labels; they come once the runtime has been listed again."""
    rt = _node()
    rt.workload("e" * 64, "ml", "train-0", "sidecar", sandbox_id=SID, env={"TEAM": "side"})
    proc = await _started(telemetry, rt, clock, refresh_interval="2s")
    assert one(proc.process((by_workload("ml", "train-0", "trainer"),)))["container.env.TEAM"]
    rt.up = False
    await clock.advance(2.0)
    sidecar = by_workload("ml", "train-0", "sidecar")
    idle = gpu(**{"hw.id": "GPU-7"})
    assert "container.env.TEAM" not in proc.process((idle, sidecar))[1].resource
    rt.up = True
    await clock.advance(2.0)
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
    assert proc.process((idle, sidecar))[1].resource["container.env.TEAM"] == "side"


async def test_a_move_during_an_outage_waits_for_a_listing_that_answered(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """A failed listing is no listing: a pod that moved while the runtime is down stays
    unlabelled for the whole outage (it was labelled with the deleted pod's env)."""
    rt = _node()
    proc = await _started(telemetry, rt, clock, refresh_interval="2s")
    on_gpu0 = by_workload("ml", "train-0", "trainer")
    assert one(proc.process((on_gpu0,)))["container.env.TEAM"] == "ml"
    rt.up = False
    await clock.advance(2.0)
    moved = replace(on_gpu0, resource={**on_gpu0.resource, "hw.id": "GPU-3"})
    idle = gpu()
    for _ in range(3):  # refreshes fail all along
        assert "container.env.TEAM" not in proc.process((idle, moved))[1].resource
        await clock.advance(2.0)
    rt.up = True
    await clock.advance(2.0)
    assert proc.process((idle, moved))[1].resource["container.env.TEAM"] == "ml"


async def test_a_pod_recreated_on_more_gpus_than_before_is_a_move(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """A container never gains a GPU: the same name on its old GPU and a new one is a new pod
    (found by the node-history property test: the new GPU got the deleted pod's labels)."""
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    on_gpu0 = by_workload("ml", "train-0", "trainer")
    on_gpu1 = replace(on_gpu0, resource={**on_gpu0.resource, "hw.id": "GPU-1"})
    idle = gpu(**{"hw.id": "GPU-1"})
    assert proc.process((on_gpu0, idle))[0].resource["container.env.TEAM"] == "ml"
    out = proc.process((on_gpu0, on_gpu1))
    assert [rm.resource.get("container.env.TEAM") for rm in out] == [None, None]
    await clock.advance(1.0)  # the early refresh the move asked for
    out = proc.process((on_gpu0, on_gpu1))
    assert [rm.resource.get("container.env.TEAM") for rm in out] == ["ml", "ml"]
