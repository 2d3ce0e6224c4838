"""Start-up objects leave the cyclic collector's full passes; reload garbage is still freed."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from otelgpu import heap
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
