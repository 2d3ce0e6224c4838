"""The processor over an in-memory runtime: matching, refresh (early ones spaced and bounded),
refused keys counted by section, runtime loss and return."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import notes
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.container_env.audit import REFUSED
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


async def test_the_start_says_which_runtimes_at_which_sockets_are_read(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """What someone asks first when no label comes through: which runtime is read, where."""
    with caplog.at_level(logging.INFO):
        proc = await _started(telemetry, FakeRuntime(), clock)
    await proc.shutdown()
    assert "container_env: runtime auto (containerd at /fake/containerd.sock)" in [
        r.getMessage() for r in caplog.records
    ]


async def test_a_bug_in_a_refresh_is_logged_and_the_refreshes_go_on(
    telemetry: SelfTelemetry,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc = await _started(telemetry, FakeRuntime(), clock, refresh_interval="1s")
    calls: list[int] = []

    async def broken() -> None:
        calls.append(1)
        raise RuntimeError("a bug")

    monkeypatch.setattr(proc, "refresh", broken)
    with caplog.at_level(logging.ERROR):
        await clock.advance(1)
        await clock.advance(1)
    await proc.shutdown()
    assert len(calls) == 2  # the loop went on after the first failure
    failed = [r for r in caplog.records if r.getMessage() == "container_env refresh failed"]
    assert len(failed) == 2 and failed[0].exc_info is not None


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


async def test_refused_keys_are_counted_under_their_section(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _node()
    rt.sandbox("s3" * 32, "ml", "eval", labels={"api_token": "t"}, annotations={"db_password": "p"})
    rt.workload("e" * 64, "ml", "eval", "main", labels={"secret_key": "k"}, env={"API_KEY": "v"})
    sections = ("env", "labels", "pod_labels", "annotations")
    keys = (["API_KEY"], ["secret_key"], ["api_token"], ["db_password"])
    options = {section: {"include": k} for section, k in zip(sections, keys, strict=True)}
    proc = await _started(telemetry, rt, clock, **options)
    for section in sections:
        assert counter(telemetry, REFUSED, section=section) == 1, section
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


async def test_early_refreshes_come_no_closer_than_a_second(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    assert rt.list_calls == 1
    proc.process((by_id("f" * 64),))
    await clock.advance(0.5)
    assert rt.list_calls == 1
    await clock.advance(0.5)
    assert rt.list_calls == 2
    await proc.shutdown()


async def test_a_container_that_stays_unknown_asks_once_among_others(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    proc.process((by_id("d" * 64),))
    await clock.advance(1.0)
    proc.process((by_id("e" * 64),))
    await clock.advance(1.0)
    assert rt.list_calls == 3
    proc.process((by_id("d" * 64),))  # asked already, whatever came between
    await clock.advance(1.0)
    assert rt.list_calls == 3
    await proc.shutdown()


async def test_the_unknown_containers_remembered_are_bounded(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    unknown = [f"{i:064x}" for i in range(4097)]
    proc.process(tuple(by_id(cid) for cid in unknown))
    await clock.advance(1.0)
    assert rt.list_calls == 2
    # Past 4096 of them the processor forgets which it asked for: the first asks again.
    proc.process((by_id(unknown[0]),))
    await clock.advance(1.0)
    assert rt.list_calls == 3
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


async def test_a_shut_down_processor_keeps_no_runtime_and_labels_nothing_after_a_refresh(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Shutdown lets go of its runtimes and what they listed: a refresh asked afterwards
    (a caller still holding the old processor through a reload) reaches no runtime and brings
    no labels back."""
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    rm = by_id(CID)
    assert "container.env.TEAM" in one(proc.process((rm,)))
    await proc.shutdown()
    listed = rt.list_calls
    await proc.refresh()
    assert rt.list_calls == listed
    assert proc.process((rm,)) == (rm,)


async def test_process_before_start_passes_batches_through(telemetry: SelfTelemetry) -> None:
    proc = make_processor(telemetry, [(_node(), True)])
    rm = by_id(CID)
    assert proc.process((rm,)) == (rm,)
    await proc.shutdown()


def _held(rm: ResourceMetrics, since: float) -> ResourceMetrics:
    """`rm` as k8s_attributes hands it on: noting since when the kubelet lists its holder on
    its device (-inf: listed by the kubelet's first answer after a start)."""
    return replace(rm, notes={notes.HOLDER_SINCE: since})


async def test_a_pod_recreated_on_another_gpu_never_borrows_the_old_pods_labels(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """R5/R10 (seen in the node e2e under load): train-0 is deleted and created again under
    its name on another GPU; the kubelet says so before the runtime is listed again, and the
    snapshot still holds the old, running container. Its TEAM must not go on the new GPU:
    absent until a listing that began after the kubelet listed the new holder, then the new
    pod's."""
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    on_gpu0 = _held(by_workload("ml", "train-0", "trainer"), float("-inf"))
    assert one(proc.process((on_gpu0,)))["container.env.TEAM"] == "ml"
    await clock.advance(5.0)
    moved = _held(gpu(**{**on_gpu0.resource, "hw.id": "GPU-3"}), clock.now)
    calls = rt.list_calls
    assert "container.env.TEAM" not in one(proc.process((moved,)))  # the old snapshot's
    assert counter(telemetry, UNMATCHED, reason="holder_changed", hw_id="GPU-3") == 2
    rt.stop(CID)
    rt.sandbox("t" * 64, "ml", "train-0", created=5.0)
    rt.workload("d" * 64, "ml", "train-0", "trainer", sandbox_id="t" * 64, env={"TEAM": "new"})
    await clock.advance(1.0)  # the early refresh the new holder asked for
    assert rt.list_calls == calls + 1
    assert one(proc.process((moved,)))["container.env.TEAM"] == "new"
    assert one(proc.process((moved,)))["container.env.TEAM"] == "new"  # steady again
    await proc.shutdown()


async def test_a_container_holding_two_gpus_gets_its_labels_on_both(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """One container on GPU-0 and GPU-1 is one holder of two devices, labelled on both batch
    after batch (it was taken for a holder moving between them and never labelled)."""
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    on_gpu0 = _held(by_workload("ml", "train-0", "trainer"), float("-inf"))
    on_gpu1 = replace(on_gpu0, resource={**on_gpu0.resource, "hw.id": "GPU-1"})
    for _ in range(3):
        out = proc.process((on_gpu0, on_gpu1))
        assert [rm.resource.get("container.env.TEAM") for rm in out] == ["ml", "ml"]
        await clock.advance(10.0)
    assert counter(telemetry, UNMATCHED, reason="holder_changed") == 0
    await proc.shutdown()


async def test_a_holder_newer_than_an_outage_waits_for_the_runtime(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """A failed listing is no listing: a holder the kubelet lists while the runtime is down
    (here a recreated pod's sidecar now holds the GPU) stays unlabelled for the whole outage
    (it was given the deleted pod's container labels), then gets its own."""
    rt = _node()
    rt.workload("e" * 64, "ml", "train-0", "sidecar", sandbox_id=SID, env={"TEAM": "side"})
    proc = await _started(telemetry, rt, clock, refresh_interval="2s")
    rt.up = False
    await clock.advance(2.0)
    sidecar = _held(by_workload("ml", "train-0", "sidecar"), clock.now)
    for _ in range(3):  # refreshes fail all along
        assert "container.env.TEAM" not in one(proc.process((sidecar,)))
        await clock.advance(2.0)
    rt.up = True
    await clock.advance(2.0)
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
    assert one(proc.process((sidecar,)))["container.env.TEAM"] == "side"
    await proc.shutdown()


async def test_names_without_the_kubelets_note_are_matched_at_once(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Without k8s_attributes before it (names from elsewhere), a name is matched by the
    current snapshot."""
    rt = _node()
    proc = await _started(telemetry, rt, clock)
    assert one(proc.process((by_workload("ml", "train-0", "trainer"),)))["container.env.TEAM"]
    await proc.shutdown()


async def test_a_container_newer_than_the_kubelets_last_answer_waits_for_the_next(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """The kubelet is slow and still says train-0/trainer holds the GPU, while the runtime
    already runs a recreated train-0 whose trainer holds none: the new container's labels
    must not go on the GPU until a kubelet answer given after it appeared confirms it."""
    rt = _node()
    proc = await _started(telemetry, rt, clock, refresh_interval="2s")
    confirmed = clock.now
    held = replace(
        by_workload("ml", "train-0", "trainer"),
        notes={notes.HOLDER_SINCE: float("-inf"), notes.HOLDERS_CONFIRMED: confirmed},
    )
    assert one(proc.process((held,)))["container.env.TEAM"] == "ml"
    rt.stop(CID)
    rt.sandbox("t" * 64, "ml", "train-0", created=5.0)
    rt.workload("d" * 64, "ml", "train-0", "trainer", sandbox_id="t" * 64, env={"TEAM": "new"})
    await clock.advance(2.0)  # listed: the kubelet has not answered since
    assert "container.env.TEAM" not in one(proc.process((held,)))
    assert counter(telemetry, UNMATCHED, reason="holder_unconfirmed") == 2
    answered = replace(held, notes={**held.notes, notes.HOLDERS_CONFIRMED: clock.now + 1})
    assert one(proc.process((answered,)))["container.env.TEAM"] == "new"
    await proc.shutdown()
