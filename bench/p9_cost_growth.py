"""P9: how the cost per point of a full cycle grows with the node: 100, 1k, 10k and 50k points.

A cycle is P2's (bench/p2_cycle_cpu.py `Pipeline`: the nvml receiver's scrape, k8s_attributes,
container_env, the Prometheus exporter's update and render, the OTLP encode), on nodes of
bench/node_fixture.py with more processes per device for the bigger sizes, run as the agent
runs it: state kept across cycles, the first cycle a warm-up. Each size prints its cost per
point and its ratio to the 10k row, measured in the same run; the OTLP encode alone is printed
beside the cycle in CPU mode, to tell which stage grows.

- CPU time (default): the best of `--rounds` cycles per size, `time.process_time()`.
- instructions (`--callgrind`): each size runs in a child under callgrind twice, with
  `--cycles K` and with `--cycles 0`; (Ir(K) - Ir(0)) / (K x points) is the cycle alone, stable
  on a noisy machine. Minutes per size at 50k.

    python -m bench.p9_cost_growth [--rounds 5] [--callgrind] [--sizes 100,1k,10k,50k]
    python -m bench.p9_cost_growth --smoke     # tiny and quick: proves the benchmark runs

Target (TARGETS.md P9): the cost per point at 50k within 1.1x of the cost at 10k. The last
line is the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from bench.node_fixture import Node
from bench.p2_cycle_cpu import Pipeline
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.encode import encode_bytes
from otelgpu.pdata.model import Batch

T = TypeVar("T")

# Sizes by name: nodes whose cycles hold about that many points.
SIZES = {
    "100": Node(gpus=1, mig_gpus=0, procs=1, pods=2),
    "1k": Node(gpus=8, mig_gpus=2, procs=2, pods=50),
    "10k": Node(gpus=16, mig_gpus=4, procs=150, sharers=4),
    "50k": Node(gpus=16, mig_gpus=4, procs=760, sharers=4),
}


def points_of(batch: Batch) -> int:
    return sum(len(m.points) for rm in batch for m in rm.metrics)


async def on_node(node: Node, work: Callable[[Pipeline], Awaitable[T]]) -> T:
    """`work` on a started pipeline for `node`, after one warm-up cycle."""
    with tempfile.TemporaryDirectory(prefix="otelgpu-growth-") as directory:
        host = node.write_host_proc(Path(directory))
        pipe = Pipeline(node, host, SelfTelemetry())
        await pipe.start()
        try:
            await pipe.cycle()
            return await work(pipe)
        finally:
            await pipe.shutdown()


async def cpu_per_point(pipe: Pipeline, rounds: int) -> tuple[int, float, float]:
    """(points, microseconds of CPU per point of a cycle, of its OTLP encode alone), the best
    of `rounds` each."""
    cycle = encode = float("inf")
    points = 0
    for _ in range(rounds):
        begun = time.process_time()
        batch, _ = await pipe.cycle()
        cycle = min(cycle, time.process_time() - begun)
        begun = time.process_time()
        encode_bytes(batch, pipe.attributes)
        encode = min(encode, time.process_time() - begun)
        points = points_of(batch)
    return points, cycle * 1e6 / points, encode * 1e6 / points


async def cycles(pipe: Pipeline, count: int) -> int:
    batch: Batch = ()
    for _ in range(count):
        batch, _ = await pipe.cycle()
    return points_of(batch)


def instructions(size: str, count: int) -> tuple[int, int]:
    """(instructions, points) of one child run under callgrind."""
    with tempfile.TemporaryDirectory(prefix="otelgpu-cg-") as directory:
        out = Path(directory, "cg.out")
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             "-m", "bench.p9_cost_growth", "--child", size, "--cycles", str(count)],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        points = re.search(r"^points (\d+)", run.stdout, re.M)
        if totals is None or points is None:
            raise RuntimeError(f"no callgrind totals for {size}: {run.stderr[-500:]}")
        return int(totals.group(1)), int(points.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,1k,10k,50k")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.child:
        counted = asyncio.run(on_node(SIZES[args.child], lambda p: cycles(p, args.cycles)))
        print(f"points {counted}")
        return
    sizes = ["100", "1k"] if args.smoke else args.sizes.split(",")
    base = "100" if args.smoke else "10k"
    rounds = 2 if args.smoke else args.rounds
    unit = "instructions" if args.callgrind else "us CPU"
    rows: dict[str, float] = {}
    for size in sizes:
        if args.callgrind:
            counted, points = instructions(size, args.cycles)
            empty, _ = instructions(size, 0)
            rows[size] = (counted - empty) / (args.cycles * points)
            line = f"{size:>5}: {points:>6} points, {rows[size]:10.0f} {unit} per point"
        else:
            points, rows[size], encode = asyncio.run(
                on_node(SIZES[size], lambda p: cpu_per_point(p, rounds))
            )
            line = (
                f"{size:>5}: {points:>6} points, cycle {rows[size]:7.2f} {unit} per point "
                f"(OTLP encode {encode:5.2f})"
            )
        print(line, flush=True)
    reference = rows[base]
    print(f"--- cycle cost per point, relative to {base}")
    for size, cost in rows.items():
        print(f"{size:>5}: {cost / reference:.3f}x")
    largest = sizes[-1]
    print(
        f"P9 cycle cost per point, {largest} / {base}: {rows[largest] / reference:.3f}x "
        f"({unit}; target <= 1.1x)"
    )


if __name__ == "__main__":
    main()
