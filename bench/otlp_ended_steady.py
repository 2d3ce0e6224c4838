"""What the OTLP exporter's ended-series memory (otelgpu/exporters/otlp/ended/) costs per point
when nothing ends: its request (`exporter.request_of`: the encode, the memory's closing
points) against the encode alone, in the same run, on steady cycles of a node
(bench/node_fixture.py, P9's `10k` size: the same series every cycle, new batch objects).

Each side runs in a child under callgrind (`bench/callgrind.py`): the node's pipeline is
started and warmed up as P9 runs it (`p9_cost_growth.on_node`), `--cycles` + 4 batches are
scraped and processed, the first 4 go through the side's code untimed (the memory learns
them), and the rest are counted. The batches are the same on both sides (the simulated
readings are seeded), so the difference is the memory's cost alone.

    python -m bench.otlp_ended_steady [--size 10k] [--cycles 5]
    python -m bench.otlp_ended_steady --smoke      # tiny and quick: proves the benchmark runs

The last line is the memory's cost per point and its share of the request's.
"""

from __future__ import annotations

import argparse
import asyncio
import random

from bench import callgrind
from bench.p9_cost_growth import SIZES, Running, on_node, points_of
from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes
from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.exporters.otlp.exporter import request_of
from otelgpu.pdata.model import Batch

LEARNED = 4  # batches the memory sees before the counted ones


async def side(running: Running, name: str, cycles: int) -> None:
    """`cycles` steady batches through `name` ("request" or "encode"), counted (`gate`)."""
    pipe = running.pipe
    batches = []
    for _ in range(LEARNED + cycles):
        scraped = await pipe.receiver.scrape()
        batches.append(pipe.env.process(pipe.k8s.process(scraped)))
    ended, cache = EndedSeries(), AttributeCache()

    def one(batch: Batch) -> None:
        if name == "request":
            request_of(batch, cache, ended)
        else:
            encode_bytes(batch, cache)

    for batch in batches[:LEARNED]:
        one(batch)
    callgrind.gate("ready")
    for batch in batches[LEARNED:]:
        one(batch)
    callgrind.gate(f"done points {points_of(batches[-1])} owed {ended.owed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", default="10k", choices=sorted(SIZES))
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    size, cycles = ("100", 2) if args.smoke else (args.size, args.cycles)
    if args.child:
        random.seed(0)  # the same readings on both sides
        asyncio.run(on_node(SIZES[size], lambda r: side(r, args.child, cycles)))
        return
    per_point: dict[str, float] = {}
    for name in ("encode", "request"):
        child = ["-m", "bench.otlp_ended_steady", "--child", name, "--size", size]
        counted, reply = callgrind.counted([*child, "--cycles", str(cycles)])
        points = int(reply.split()[1])
        per_point[name] = counted / (cycles * points)
        print(f"{name:>8}: {per_point[name]:9.0f} instructions per point ({points} points)")
    memory = per_point["request"] - per_point["encode"]
    print(
        f"ended-series memory, steady: {memory:.0f} instructions per point "
        f"({memory / per_point['request']:.3f} of the request's)"
    )


if __name__ == "__main__":
    main()
