"""P9 measures the cycle with the heap as the agent keeps it: the settle after start, then the
agent's heap upkeep settling what the first cycles built, not a freeze of the bench's own."""

from __future__ import annotations

import gc

import pytest

from bench import p9_cost_growth as p9
from otelgpu.service import heap


async def test_the_warm_up_runs_the_agents_heap_upkeep(monkeypatch: pytest.MonkeyPatch) -> None:
    settles: list[tuple[str, int]] = []
    cycles = 0
    cycle = p9.Pipeline.cycle

    async def counted(pipe: p9.Pipeline) -> object:
        nonlocal cycles
        cycles += 1
        return await cycle(pipe)

    monkeypatch.setattr(p9.Pipeline, "cycle", counted)
    monkeypatch.setattr(heap, "settle", lambda: settles.append(("settle", cycles)) or 0)
    monkeypatch.setattr(heap, "settle_again", lambda: settles.append(("again", cycles)) or 0)
    points = await p9.on_node(p9.SIZES["100"], lambda pipe: p9.repeated(pipe, 2, "cycle"))
    assert points > 0
    # At start, then once more SETTLE_TICKS ticks after the tick that saw the first cycle: the
    # agent's sequence, a cycle for each of its ticks (a second apart: the collection interval
    # of the agent's pipelines). Nothing during the measured cycles.
    warm = 1 + heap.SETTLE_TICKS
    assert settles == [("settle", 0), ("again", warm)]
    assert cycles == warm + 2


async def test_what_the_warm_up_built_is_frozen() -> None:
    gc.unfreeze()
    try:
        await p9.on_node(p9.SIZES["100"], lambda pipe: p9.repeated(pipe, 0, "cycle"))
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
