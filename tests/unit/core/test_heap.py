"""Start-up objects leave the cyclic collector's full passes, and so does what the first
collection built; reload garbage is still freed; freed C-heap pages go back to the system."""

from __future__ import annotations

import asyncio
import gc
import platform
import weakref
from pathlib import Path

import pytest

from otelgpu.service import heap
from otelgpu.service.agent import Agent
from tests.unit.config.test_reload import config, core_registry


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_settle_freezes_what_is_alive() -> None:
    kept = Node()
    frozen = heap.settle()
    assert frozen > 0 and gc.get_freeze_count() == frozen
    assert kept not in gc.get_objects()  # frozen objects leave the generations gc walks


def test_garbage_of_a_frozen_start_is_freed_by_the_next_settle() -> None:
    node = Node()
    gone = weakref.ref(node)
    heap.settle()
    del node
    gc.collect()
    assert gone() is not None  # frozen: a collection does not see it
    heap.settle()  # the next start (a reload) thaws before it collects
    assert gone() is None


async def test_the_agent_settles_after_each_start(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(heap, "settle", lambda: calls.append(1) or 0)
    agent = Agent(lambda: config("v2"), core_registry())
    running = asyncio.create_task(agent.run(config("v1")))
    while agent.service is None:
        await asyncio.sleep(0.01)
    assert calls == [1]
    first = agent.service
    agent.request_reload()
    while agent.service is first:
        await asyncio.sleep(0.01)
    assert calls == [1, 1]
    agent.request_stop()
    await running


def _rss_anon() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_trim_hands_free_pages_between_live_blocks_back() -> None:
    assert platform.libc_ver()[0] == "glibc"  # the image and this machine: trim must work
    # 64 KiB blocks stay in the heap (below glibc's mmap threshold); freeing every other one
    # leaves holes glibc keeps, since live blocks sit above them.
    blocks: list[bytes | None] = [bytes(64 << 10) for _ in range(1200)]
    for i in range(0, len(blocks), 2):
        blocks[i] = None
    heap.trim()  # whatever came before this test
    before = _rss_anon()
    blocks.extend(bytes(64 << 10) for _ in range(600))  # refill, then free: holes again
    for i in range(len(blocks) - 600, len(blocks), 2):
        blocks[i] = None
    grown = _rss_anon()
    assert heap.trim() is True
    assert _rss_anon() < grown - (8 << 20), (before, grown, _rss_anon())


async def test_the_agent_trims_after_start_and_every_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[float] = []
    monkeypatch.setattr(heap, "trim", lambda: calls.append(asyncio.get_running_loop().time()))
    monkeypatch.setattr(heap, "TRIM_INTERVAL", 0.05)
    agent = Agent(lambda: config("v1"), core_registry())
    running = asyncio.create_task(agent.run(config("v1")))
    try:
        async with asyncio.timeout(10):  # a bound, not a timing: a missing trimmer fails here
            while len(calls) < 4:
                await asyncio.sleep(0.01)
    finally:
        agent.request_stop()
    await running
    after_stop = len(calls)
    await asyncio.sleep(0.2)
    assert len(calls) == after_stop  # the trimmer stopped with the agent


def _record_settles(monkeypatch: pytest.MonkeyPatch, into: list[str]) -> None:
    monkeypatch.setattr(heap, "settle", lambda: into.append("settle") or 0)
    monkeypatch.setattr(heap, "settle_again", lambda: into.append("again") or 0)


def test_upkeep_settles_again_once_some_ticks_after_the_first_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settles: list[str] = []
    trims: list[int] = []
    _record_settles(monkeypatch, settles)
    monkeypatch.setattr(heap, "trim", lambda: trims.append(1) or True)
    collected = [100.0]  # points collected before this service started (a reload's)
    upkeep = heap.Upkeep(lambda: collected[0])
    upkeep.tick()
    upkeep.tick()
    assert settles == [] and not upkeep.settled  # nothing collected since the start
    collected[0] = 160.0
    upkeep.tick()  # sees the first collection
    for _ in range(heap.SETTLE_TICKS - 1):
        upkeep.tick()
        assert settles == []  # it, and a few after it, may still be in the pipeline
    upkeep.tick()
    assert settles == ["again"] and upkeep.settled  # then settled, nothing thawed
    collected[0] = 300.0
    for _ in range(3):
        upkeep.tick()
    assert settles == ["again"]  # once per service
    assert len(trims) == 2 + 1 + heap.SETTLE_TICKS + 3  # every tick trims


def test_settle_again_keeps_the_earlier_freeze() -> None:
    early = Node()
    heap.settle()
    gone = weakref.ref(early)
    del early
    late = Node()
    frozen = heap.settle_again()
    assert frozen == gc.get_freeze_count()
    assert late not in gc.get_objects()  # frozen too
    assert gone() is not None  # garbage of the start's freeze: still frozen, not collected
    heap.settle()  # what the next start does: everything thawed, collected, frozen again
    assert gone() is None


async def test_the_agent_settles_again_after_its_first_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settles: list[tuple[str, int]] = []
    agent = Agent(lambda: config("v1"), core_registry())

    def record(kind: str) -> int:  # and how many collections the receiver had made by then
        graph = agent.service.graph if agent.service else None
        receivers = graph.receivers.values() if graph else ()
        settles.append((kind, sum(getattr(r, "cycles", 0) for r in receivers)))
        return 0

    monkeypatch.setattr(heap, "settle", lambda: record("settle"))
    monkeypatch.setattr(heap, "settle_again", lambda: record("again"))
    monkeypatch.setattr(heap, "trim", lambda: True)
    monkeypatch.setattr(heap, "TRIM_INTERVAL", 0.01)
    running = asyncio.create_task(agent.run(config("v1")))
    try:
        async with asyncio.timeout(10):  # a bound, not a timing: a missing settle fails here
            while len(settles) < 2:
                await asyncio.sleep(0.01)
    finally:
        agent.request_stop()
    await running
    assert settles[0][0] == "settle"  # at start: the previous service's objects thawed
    assert settles[1][0] == "again" and settles[1][1] > 0  # after a collection
    assert len(settles) == 2


def test_the_collector_settings_leave_full_passes_to_the_upkeep_and_are_put_back() -> None:
    before = gc.get_threshold()
    with heap.collector_settings():
        young, middle, full = gc.get_threshold()
        assert (young, middle) == before[:2]  # the young generations as before
        assert full == 2**31 - 1  # no full pass of the collector's own
    assert gc.get_threshold() == before


def test_upkeep_makes_a_full_pass_every_full_pass_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    passes: list[int] = []
    monkeypatch.setattr(heap, "trim", lambda: True)
    monkeypatch.setattr(gc, "collect", lambda generation=2: passes.append(generation) or 0)
    upkeep = heap.Upkeep(lambda: 0.0)  # nothing collected: no settle, only the passes
    for _ in range(heap.FULL_PASS_TICKS - 1):
        upkeep.tick()
    assert passes == []
    upkeep.tick()
    assert passes == [2]
    for _ in range(heap.FULL_PASS_TICKS):
        upkeep.tick()
    assert passes == [2, 2]


async def test_the_agent_holds_the_collector_settings_while_it_runs() -> None:
    before = gc.get_threshold()
    agent = Agent(lambda: config("v1"), core_registry())
    running = asyncio.create_task(agent.run(config("v1")))
    try:
        async with asyncio.timeout(10):  # a bound, not a timing
            while agent.service is None:
                await asyncio.sleep(0.01)
        seen = gc.get_threshold()
    finally:
        agent.request_stop()
    await running
    assert seen == (*before[:2], 2**31 - 1)
    assert gc.get_threshold() == before  # put back
