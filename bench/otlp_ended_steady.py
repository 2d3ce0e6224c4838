"""What the OTLP exporter's ended-series memory (otelgpu/exporters/otlp/ended/) costs per point
when nothing ends: its request (`exporter.request_of`: the encode written down in a trail, the
memory's closing points) against the encode alone, on steady cycles of a node
(bench/node_fixture.py, P9's `10k` size: the same series every cycle, new batch objects).

One child under callgrind (`bench/callgrind.py`) starts the node's pipeline and warms it up as
P9 runs it (`p9_cost_growth.on_node`), scrapes and processes `--cycles` + 4 batches once, then
counts each side in its own window, alternating, `--rounds` times: a side gets a new cache
(and memory), sees the first 4 batches untimed (the memory learns them), then the rest
counted. Both sides read the same batches in the same process, so the difference is the
memory's cost alone; the rounds show how much the collector's timing moves it.

    python -m bench.otlp_ended_steady [--size 10k] [--cycles 5] [--rounds 2]
    python -m bench.otlp_ended_steady --smoke      # tiny and quick: proves the benchmark runs

The last line is the memory's cost per point (the median of the rounds) and its share of the
request's.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
from collections.abc import Callable

from bench import callgrind
from bench.p9_cost_growth import SIZES, Running, on_node, points_of
from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes
from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.exporters.otlp.exporter import request_of
from otelgpu.pdata.model import Batch

LEARNED = 4  # batches the memory sees before the counted ones
SIDES = ("encode", "request")


async def sides(running: Running, cycles: int, rounds: int) -> None:
    """Each side over the same `cycles` steady batches, in alternate counted windows."""
    pipe = running.pipe
    batches = []
    for _ in range(LEARNED + cycles):
        scraped = await pipe.receiver.scrape()
        batches.append(pipe.env.process(pipe.k8s.process(scraped)))
    for _ in range(rounds):
        for name in SIDES:
            one = _side(name)
            for batch in batches[:LEARNED]:
                one(batch)
            callgrind.gate("ready")
            for batch in batches[LEARNED:]:
                one(batch)
            callgrind.gate(f"done points {points_of(batches[-1])}")


def _side(name: str) -> Callable[[Batch], object]:
    """One side's work on a batch, with a new cache (and memory) of its own."""
    cache = AttributeCache()
    if name == "request":
        ended = EndedSeries()
        return lambda batch: request_of(batch, cache, ended)
    return lambda batch: encode_bytes(batch, cache)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", default="10k", choices=sorted(SIZES))
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    size, cycles, rounds = ("100", 2, 1) if args.smoke else (args.size, args.cycles, args.rounds)
    if args.child:
        random.seed(0)  # the same readings in every run
        asyncio.run(on_node(SIZES[size], lambda r: sides(r, cycles, rounds)))
        return
    child = ["-m", "bench.otlp_ended_steady", "--child", "--size", size]
    counted = callgrind.windows(
        [*child, "--cycles", str(cycles), "--rounds", str(rounds)], rounds * len(SIDES)
    )
    memory: list[float] = []
    for round_ in range(rounds):
        per_point = {}
        for name, (count, reply) in zip(SIDES, counted[round_ * 2 : round_ * 2 + 2], strict=True):
            points = int(reply.split()[1])
            per_point[name] = count / (cycles * points)
            print(f"round {round_ + 1} {name:>8}: {per_point[name]:9.0f} instructions per point")
        memory.append(per_point["request"] - per_point["encode"])
        share = memory[-1] / per_point["request"]
        print(f"round {round_ + 1}   memory: {memory[-1]:9.0f} ({share:.3f} of the request's)")
    middle = statistics.median(memory)
    print(
        f"ended-series memory, steady: {middle:.0f} instructions per point "
        f"({middle / per_point['request']:.3f} of the request's; {points} points, "
        f"rounds {min(memory):.0f} to {max(memory):.0f})"
    )


if __name__ == "__main__":
    main()
