"""Labels only from the live container: running, in its pod's newest ready sandbox."""

from __future__ import annotations

from otelgpu.component.telemetry import SelfTelemetry
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import (
    by_id,
    by_workload,
    make_processor,
    one,
)

OPTS = {"env": {"include": ["TEAM"]}, "pod_labels": {"include": ["team"]}}
NAMED = ("ml", "train-0", "trainer")


async def _run(telemetry: SelfTelemetry, rt: FakeRuntime, clock: FakeClock):
    proc = make_processor(telemetry, [(rt, True)], clock, refresh_interval="1s", **OPTS)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    return proc


def _labels(proc, rm) -> dict[str, object]:  # type: ignore[no-untyped-def]
    return {
        k: v
        for k, v in one(proc.process((rm,))).items()
        if k.startswith(("container.env.", "k8s.pod.label."))
    }


def _pod(rt: FakeRuntime, uid: str, team: str, *, created: float, sandbox_running: bool = True):
    rt.sandbox(
        f"sb-{uid}",
        "ml",
        "train-0",
        uid=uid,
        labels={"team": team},
        created=created,
        running=sandbox_running,
    )


def _trainer(rt: FakeRuntime, uid: str, team: str, *, created: float, running: bool = True):
    rt.workload(
        f"c-{uid}",
        *NAMED,
        uid=uid,
        sandbox_id=f"sb-{uid}",
        env={"TEAM": team},
        created=created,
        running=running,
    )


OLD = {"container.env.TEAM": "old", "k8s.pod.label.team": "old"}
NEW = {"container.env.TEAM": "new", "k8s.pod.label.team": "new"}


async def test_stopped_container_never_matches_and_is_not_read(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    _pod(rt, "u1", "old", created=1.0)
    _trainer(rt, "u1", "old", created=2.0, running=False)
    proc = await _run(telemetry, rt, clock)
    assert _labels(proc, by_workload(*NAMED)) == {}
    assert _labels(proc, by_id("c-u1")) == {}
    assert rt.spec_calls == 1  # the sandbox only: a stopped container's spec is never read
    await proc.shutdown()


async def test_recreated_pod_waits_for_its_own_container(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """The same-name recreate race: the dead pod's records are still listed."""
    rt = FakeRuntime()
    _pod(rt, "old", "old", created=1.0)
    _trainer(rt, "old", "old", created=2.0)
    proc = await _run(telemetry, rt, clock)
    assert _labels(proc, by_workload(*NAMED)) == OLD

    rt.stop("c-old")
    rt.stop("sb-old")
    _pod(rt, "new", "new", created=3.0)  # ready; its container is not created yet
    await clock.advance(1.0)
    assert _labels(proc, by_workload(*NAMED)) == {}
    assert _labels(proc, by_id("c-old")) == {}

    _trainer(rt, "new", "new", created=4.0, running=False)  # created, not started yet
    await clock.advance(1.0)
    assert _labels(proc, by_workload(*NAMED)) == {}

    _trainer(rt, "new", "new", created=4.0)
    await clock.advance(1.0)
    assert _labels(proc, by_workload(*NAMED)) == NEW
    assert _labels(proc, by_id("c-new")) == NEW
    await proc.shutdown()


async def test_a_container_older_than_its_pods_newest_sandbox_never_matches(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Same pod (same UID), sandbox replaced by the kubelet while the old one still runs:
    only containers of the newest ready sandbox match."""
    rt = FakeRuntime()
    rt.sandbox("sb-1", "ml", "train-0", uid="u", labels={"team": "old"}, created=1.0)
    rt.workload("c-1", *NAMED, uid="u", sandbox_id="sb-1", env={"TEAM": "old"}, created=2.0)
    rt.sandbox("sb-2", "ml", "train-0", uid="u", labels={"team": "new"}, created=3.0)
    proc = await _run(telemetry, rt, clock)
    assert _labels(proc, by_workload(*NAMED)) == {}
    assert _labels(proc, by_id("c-1")) == {}
    rt.workload("c-2", *NAMED, uid="u", sandbox_id="sb-2", env={"TEAM": "new"}, created=4.0)
    await clock.advance(1.0)
    assert _labels(proc, by_workload(*NAMED)) == NEW
    await proc.shutdown()


async def test_two_live_pods_of_one_name_the_newest_sandbox_names_the_workload(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """A force-deleted pod still terminating beside its successor (different UIDs): a
    lookup by name finds the newest pod; a lookup by container ID finds each its own."""
    rt = FakeRuntime()
    _pod(rt, "new", "new", created=3.0)
    _trainer(rt, "new", "new", created=3.5)
    _pod(rt, "old", "old", created=1.0)
    _trainer(rt, "old", "old", created=9.0)  # restarted late: newer container, older pod
    proc = await _run(telemetry, rt, clock)
    assert _labels(proc, by_workload(*NAMED)) == NEW
    assert _labels(proc, by_id("c-old")) == OLD
    assert _labels(proc, by_id("c-new")) == NEW
    await proc.shutdown()


async def test_a_container_whose_named_sandbox_is_gone_never_borrows_another(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    _pod(rt, "new", "new", created=3.0)
    _trainer(rt, "old", "old", created=2.0)  # names sb-old, which is not listed at all
    proc = await _run(telemetry, rt, clock)
    assert _labels(proc, by_id("c-old")) == {}
    assert _labels(proc, by_workload(*NAMED)) == {}
    await proc.shutdown()


async def test_sandbox_not_ready_means_no_match(telemetry: SelfTelemetry, clock: FakeClock) -> None:
    rt = FakeRuntime()
    _pod(rt, "u1", "old", created=1.0, sandbox_running=False)
    _trainer(rt, "u1", "old", created=2.0)
    proc = await _run(telemetry, rt, clock)
    assert _labels(proc, by_workload(*NAMED)) == {}
    await proc.shutdown()


async def test_without_a_sandbox_id_the_pod_uid_picks_the_sandbox(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    _pod(rt, "new", "new", created=3.0)
    rt.workload("c-old", *NAMED, uid="old", env={"TEAM": "old"})  # names no sandbox
    proc = await _run(telemetry, rt, clock)
    assert _labels(proc, by_id("c-old")) == {}  # the ready sandbox is another pod's
    rt.workload("c-new", *NAMED, uid="new", env={"TEAM": "new"})
    await clock.advance(1.0)
    assert _labels(proc, by_id("c-new")) == NEW
    await proc.shutdown()
