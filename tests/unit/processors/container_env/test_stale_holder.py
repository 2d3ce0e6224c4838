"""Which pod uid a kubelet pair refers to, when a pod is recreated under its name: the notes
k8s_attributes leaves (`holder.since`, `holders.changed`) against when the runtime listed
each pod uid under the name (reason `holder_stale` while the pair is an older uid's)."""

from __future__ import annotations

from dataclasses import replace

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import notes
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import by_workload, counter, make_processor, one

TEAM = "container.env.TEAM"
UNMATCHED = "otelgpu_enrichment_unmatched_points_total"
OPTIONS = {"env": {"include": ["TEAM"]}, "refresh_interval": "1h"}  # listed when told


def _pod(rt: FakeRuntime, uid: str, team: str) -> str:
    """A running train-0 of pod uid `uid`; returns its container ID."""
    sandbox, cid = uid[-1] * 64, uid[-1].upper() * 64
    rt.sandbox(sandbox, "ml", "train-0", uid=uid, created=float(ord(uid[-1])))
    rt.workload(cid, "ml", "train-0", "trainer", sandbox_id=sandbox, env={"TEAM": team}, uid=uid)
    return cid


def _held(since: float, changed: float) -> object:
    return replace(
        by_workload("ml", "train-0", "trainer"),
        notes={
            notes.HOLDER_SINCE: since,
            notes.HOLDERS_CONFIRMED: float("inf"),  # answered after every listing
            notes.HOLDERS_CHANGED: changed,
        },
    )


async def _recreated(telemetry: SelfTelemetry, clock: FakeClock) -> tuple[object, float]:
    """uid-a listed at t, gone from the listing at t + 1; uid-b first listed at t + 2.
    Returns the processor and t."""
    rt = FakeRuntime()
    proc = make_processor(telemetry, [(rt, True)], clock, **OPTIONS)
    old = _pod(rt, "uid-a", "old")
    t = clock.now
    await proc.start(FakeHost(telemetry))  # its first listing, at t
    rt.stop(old)
    rt.stop("a" * 64)
    await clock.advance(1)
    await proc.refresh()
    _pod(rt, "uid-b", "new")
    await clock.advance(1)
    await proc.refresh()
    return proc, t


async def test_a_pair_listed_while_the_old_uid_ran_waits_for_a_changed_answer(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc, t = await _recreated(telemetry, clock)
    # listed since the listing at t, which showed uid-a running: uid-a's
    assert TEAM not in one(proc.process((_held(since=t, changed=t),)))
    # changed at the start of the last listing without the new container: not after it
    assert TEAM not in one(proc.process((_held(since=t, changed=t + 1),)))
    assert counter(telemetry, UNMATCHED, reason="holder_stale") == 4
    assert one(proc.process((_held(since=t, changed=t + 1.5),)))[TEAM] == "new"
    await proc.shutdown()


async def test_a_pair_first_listed_once_the_old_uid_was_gone_is_the_new_pods(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc, t = await _recreated(telemetry, clock)
    # the listing at t + 1 no longer showed uid-a: a pair listed since then is not uid-a's
    assert one(proc.process((_held(since=t + 1, changed=t + 1),)))[TEAM] == "new"
    await proc.shutdown()


async def test_a_pair_first_listed_after_the_last_listing_showing_the_old_uid_is_the_new_pods(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Listed after the listing at t (the last that showed uid-a running) and before the one at
    t + 1 told it gone: the kubelet never gives a running container other devices, so a pair
    it first lists then comes from the new pod, even though the new container appears later
    (an image pull) and the kubelet's answer never changes again."""
    proc, t = await _recreated(telemetry, clock)
    assert one(proc.process((_held(since=t + 0.5, changed=t + 0.5),)))[TEAM] == "new"
    assert counter(telemetry, UNMATCHED, reason="holder_stale") == 0
    await proc.shutdown()


async def test_pod_uids_first_listed_together_are_not_told_apart(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """The first listing (after a start) shows the old pod still terminating beside the new
    one: the agent never saw which came first, so neither is held back (the newest sandbox
    is the one matched by name)."""
    rt = FakeRuntime()
    proc = make_processor(telemetry, [(rt, True)], clock, **OPTIONS)
    _pod(rt, "uid-a", "old")
    _pod(rt, "uid-b", "new")
    await proc.start(FakeHost(telemetry))
    await clock.advance(1)
    await proc.refresh()
    assert one(proc.process((_held(since=float("-inf"), changed=float("-inf")),)))[TEAM] == "new"
    await proc.shutdown()


async def test_without_the_change_note_a_name_is_matched(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    proc, t = await _recreated(telemetry, clock)
    held = _held(since=t + 0.5, changed=t + 0.5)
    bare = replace(held, notes={k: v for k, v in held.notes.items() if k != notes.HOLDERS_CHANGED})
    assert one(proc.process((bare,)))[TEAM] == "new"
    await proc.shutdown()


async def test_a_pod_uid_listed_again_is_not_gone(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """uid-a's container restarts (a new container, same pod uid): missing from one listing,
    it is back in the next, so a pair listed after that is still uid-a's."""
    rt = FakeRuntime()
    proc = make_processor(telemetry, [(rt, True)], clock, **OPTIONS)
    old = _pod(rt, "uid-a", "old")
    t = clock.now
    await proc.start(FakeHost(telemetry))
    rt.stop(old)
    await clock.advance(1)
    await proc.refresh()  # t + 1: uid-a's container is not running
    rt.workload("c" * 64, "ml", "train-0", "trainer", sandbox_id="a" * 64, uid="uid-a")
    await clock.advance(1)
    await proc.refresh()  # t + 2: running again
    rt.stop("c" * 64)
    rt.stop("a" * 64)
    _pod(rt, "uid-b", "new")
    await clock.advance(1)
    await proc.refresh()  # t + 3: uid-b
    await clock.advance(1)
    await proc.refresh()
    assert TEAM not in one(proc.process((_held(since=t + 2, changed=t + 2),)))
    await proc.shutdown()
