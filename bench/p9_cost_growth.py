"""P9: how the cost per point of a full cycle grows with the node: 100, 1k, 10k and 50k points.

A cycle is P2's (bench/p2_cycle_cpu.py `Pipeline`: the nvml receiver's scrape, k8s_attributes,
container_env, the Prometheus exporter's update and render, the OTLP encode), on nodes of
bench/node_fixture.py with more processes per device for the bigger sizes, run as the agent
runs it (`Running`): state kept across cycles, under the agent's collector settings, its heap
upkeep ticked after each cycle as the agent ticks it each second (otelgpu/service/heap.py),
after the agent's warm-up (`warm_up`: the settle at start, then cycles until the upkeep has
settled what the first ones built). Each size prints its cost per point and its ratio to the
10k row, measured in the same run; `--stages` adds each stage of a cycle run alone (the nvml
scrape, both processors, the Prometheus update and render, the OTLP encode), to tell which
stage grows.

- CPU time (default): the mean of `--rounds` cycles per size, `time.process_time()` (a stage
  alone: the best of `--rounds`), with the collector's full passes during those cycles.
- instructions (`--callgrind`): each size (and stage) runs in a child under callgrind, its
  instrumentation switched on for `--cycles K` cycles (or runs of the stage) only, after the
  start and the warm-up; Ir / (K x points) is the cycle (or the stage) alone, stable on a
  noisy machine. K is 10 by default: the collector's passes come every few cycles, and a
  window of three may hold none of them. Minutes per size at 50k.

    python -m bench.p9_cost_growth [--rounds 5] [--callgrind [--cycles 10]] [--stages]
                                   [--sizes 100,1k,10k,50k]
    python -m bench.p9_cost_growth --smoke     # tiny and quick: proves the benchmark runs

Target (TARGETS.md P9): the cost per point at 50k within 1.1x of the cost at 10k. The last
line is the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bench import callgrind
from bench.node_fixture import Node
from bench.p2_cycle_cpu import Pipeline, otlp_bytes
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch
from otelgpu.service import heap

T = TypeVar("T")
WARM_UP_LIMIT = 20  # cycles

# Sizes by name: nodes whose cycles hold about that many points.
SIZES = {
    "100": Node(gpus=1, mig_gpus=0, procs=1, pods=2),
    "1k": Node(gpus=8, mig_gpus=2, procs=2, pods=50),
    "10k": Node(gpus=16, mig_gpus=4, procs=150, sharers=4),
    "50k": Node(gpus=16, mig_gpus=4, procs=760, sharers=4),
}


def points_of(batch: Batch) -> int:
    return sum(len(m.points) for rm in batch for m in rm.metrics)


@dataclass
class Running:
    """A started pipeline, run as the agent runs it: its heap upkeep (otelgpu/service/heap.py)
    ticked after each cycle, as the agent ticks it every second and its pipelines collect
    every second. The agent counts collections by its receivers' points; here, by the cycles
    run."""

    pipe: Pipeline
    cycles: int = 0
    upkeep: heap.Upkeep | None = None

    def start_upkeep(self) -> None:
        """The start's settle, and the upkeep from then on (`heap.after_start`)."""
        self.upkeep = heap.after_start(lambda: self.cycles)

    async def cycle(self) -> Batch:
        """One cycle of the pipeline, then the upkeep's tick."""
        batch, _ = await self.pipe.cycle()
        self.cycles += 1
        if self.upkeep is not None:
            self.upkeep.tick()
        return batch


async def on_node(node: Node, work: Callable[[Running], Awaitable[T]]) -> T:
    """`work` on a started pipeline for `node`, under the agent's collector settings, after
    the warm-up (`warm_up`)."""
    with tempfile.TemporaryDirectory(prefix="otelgpu-growth-") as directory:
        host = node.write_host_proc(Path(directory))
        pipe = Pipeline(node, host, SelfTelemetry())
        await pipe.start()
        try:
            with heap.collector_settings():  # the agent's, while it runs
                running = Running(pipe)
                await warm_up(running)
                return await work(running)
        finally:
            await pipe.shutdown()


async def warm_up(running: Running) -> int:
    """What the agent does with its heap from its start to its steady state: the start's
    settle, then cycles until the upkeep has settled what they built. Returns the warm-up
    cycles."""
    running.start_upkeep()
    assert running.upkeep is not None
    while not running.upkeep.settled:
        if running.cycles == WARM_UP_LIMIT:
            raise RuntimeError(f"the heap upkeep did not settle in {WARM_UP_LIMIT} cycles")
        await running.cycle()
    return running.cycles


STAGES = ("nvml scrape", "processors", "prometheus", "otlp encode")


async def stage(pipe: Pipeline, name: str, raw: Batch, processed: Batch) -> None:
    """One stage of a cycle alone: the nvml receiver's scrape; k8s_attributes then
    container_env on `raw`; the Prometheus exporter's update and render of `processed`; the
    OTLP encode of `processed`."""
    if name == "nvml scrape":
        await pipe.receiver.scrape()
    elif name == "processors":
        pipe.env.process(pipe.k8s.process(raw))
    elif name == "prometheus":
        await pipe.prometheus.consume(processed)
        await pipe.prometheus.refresh()
    elif name == "otlp encode":
        otlp_bytes(processed, pipe.attributes, pipe.ended)
    else:
        raise ValueError(name)


async def batches(pipe: Pipeline) -> tuple[Batch, Batch]:
    """(a scraped batch, the same processed): what the stages after the scrape take."""
    raw = await pipe.receiver.scrape()
    return raw, pipe.env.process(pipe.k8s.process(raw))


class FullPasses:
    """Counts the collector's full (generation 2) passes while it is entered, and the seconds
    they took: what grows with the node when the collector, not the upkeep, starts them."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._began = 0.0

    def __enter__(self) -> FullPasses:
        gc.callbacks.append(self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._began


async def cpu_per_point(
    running: Running, rounds: int, stages: tuple[str, ...]
) -> tuple[int, dict[str, float]]:
    """(points, microseconds of CPU per point of a cycle and its upkeep tick, the mean of
    `rounds` (the collector's passes come every few cycles: the best cycle would leave them
    out), and of each of `stages` alone, the best of `rounds`; and "full passes", the
    collector's full passes during the `rounds` cycles)."""
    best = dict.fromkeys(stages, float("inf"))
    points = 0
    pipe = running.pipe
    passes = FullPasses()
    cycles = 0.0
    for _ in range(rounds):
        begun = time.process_time()
        with passes:
            batch = await running.cycle()
        cycles += time.process_time() - begun
        points = points_of(batch)
        raw, processed = await batches(pipe)
        for name in stages:
            begun = time.process_time()
            await stage(pipe, name, raw, processed)
            best[name] = min(best[name], time.process_time() - begun)
    costs = {
        name: cost * 1e6 / points for name, cost in (("cycle", cycles / rounds), *best.items())
    }
    return points, costs | {"full passes": passes.count, "full pass seconds": passes.seconds}


async def repeated(
    running: Running, count: int, name: str, gate: Callable[[str], None] | None = None
) -> int:
    """`count` cycles, each with its upkeep tick (`name` "cycle"), or runs of one stage;
    returns the points of a cycle. `gate` is told "ready" before them and "done points N" after
    them, and returns when it may go on (`instructions`: the parent switches callgrind's
    instrumentation on, then off)."""
    raw, processed = await batches(running.pipe)
    points = points_of(processed)
    if gate is not None:
        gate("ready")
    for _ in range(count):
        if name == "cycle":
            await running.cycle()
        else:
            await stage(running.pipe, name, raw, processed)
    if gate is not None:
        gate(f"done points {points}")
    return points


def instructions(size: str, count: int, name: str) -> tuple[int, int]:
    """(instructions, points) of `count` cycles, or runs of one stage, in a child under
    callgrind (`bench/callgrind.py`), instrumented only while they run."""
    arguments = ["-m", "bench.p9_cost_growth", "--child", size, "--cycles", str(count)]
    counted, reply = callgrind.counted([*arguments, "--stage", name])
    return counted, int(reply.split()[1])


def per_point_instructions(size: str, count: int, name: str) -> tuple[int, float]:
    """(points, instructions per point of one cycle or stage)."""
    counted, points = instructions(size, count, name)
    return points, counted / (count * points)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,1k,10k,50k")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument(
        "--cycles",
        type=int,
        default=10,
        help="measured cycles per child (--callgrind): enough to hold the collector's passes",
    )
    parser.add_argument(
        "--stages", action="store_true", help="also each stage of a cycle alone, per point"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--stage", default="cycle", help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.child:
        asyncio.run(
            on_node(
                SIZES[args.child], lambda p: repeated(p, args.cycles, args.stage, callgrind.gate)
            )
        )
        return
    sizes = ["100", "1k"] if args.smoke else args.sizes.split(",")
    base = "100" if args.smoke else "10k"
    rounds = 2 if args.smoke else args.rounds
    stages = STAGES if args.stages else ()
    unit, digits = ("instructions", 0) if args.callgrind else ("us CPU", 2)
    rows: dict[str, dict[str, float]] = {}
    for size in sizes:
        if args.callgrind:
            costs = {}
            for name in ("cycle", *stages):
                points, costs[name] = per_point_instructions(size, args.cycles, name)
        else:
            points, costs = asyncio.run(
                on_node(SIZES[size], lambda p: cpu_per_point(p, rounds, stages))
            )
        rows[size] = costs
        parts = ", ".join(f"{name} {costs[name]:.{digits}f}" for name in stages)
        if "full passes" in costs:
            parts += (", " if parts else "") + (
                f"collector: {costs['full passes']:.0f} full passes in {rounds} cycles, "
                f"{costs['full pass seconds']:.2f} s"
            )
        line = (
            f"{size:>5}: {points:>6} points, cycle {costs['cycle']:10.{digits}f} {unit} per point"
        )
        print(line + (f" ({parts})" if parts else ""), flush=True)
    reference = rows[base]
    print(f"--- cost per point, relative to {base}: cycle" + "".join(f", {n}" for n in stages))
    for size, costs in rows.items():
        ratios = ", ".join(f"{costs[n] / reference[n]:.3f}x" for n in ("cycle", *stages))
        print(f"{size:>5}: {ratios}")
    largest = sizes[-1]
    print(
        f"P9 cycle cost per point, {largest} / {base}: "
        f"{rows[largest]['cycle'] / reference['cycle']:.3f}x ({unit}; target <= 1.1x)"
    )


if __name__ == "__main__":
    main()
