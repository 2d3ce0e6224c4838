"""The kubelet_stats receiver's CPU per read, at a full node (110 pods) and a huge one (5,000).

Each size's summary (tests/peers/kubelet_stats_server.py `busy_node_summary`: two containers,
two volumes and a network per pod; 110 pods ~300 KB, 5,000 pods ~13 MB) is served over HTTPS
with a bearer token by the stand-in kubelet in a child process, so this process's CPU is the
agent's alone. In this process, with the production client (`make_client`):

    read      KubeletStatsReceiver.scrape(): the HTTPS request, the body read whole, JSON
              parsing and conversion (in its worker thread), the gone-marker bookkeeping
    ingest    the batch into a Prometheus exporter's series store (the `otel` naming), as
              the shipped k8s-node pipeline does with it
    loads     json.loads of the same body alone: the floor any Python reader of the summary
              pays, measured in the same run as the baseline of the ratio

CPU is `time.process_time()` (every thread: the receiver's conversion runs in a worker), the
median over `--reads` reads after one warm-up read (the first read of a size builds the
exporter's series; later ones are the steady state a node sees every interval).

    python bench/kubelet_stats_read.py [--pods 110 5000] [--reads 9] [--groups all|default]
    python bench/kubelet_stats_read.py --smoke      # tiny and quick: proves it runs

Target: a 110-pod read well under 1% of a core at the default 10 s interval (100 ms per read).
The figure line is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata.model import Batch, point_count
from otelgpu.receivers.kubelet_stats.config import KubeletStatsReceiverConfig
from otelgpu.receivers.kubelet_stats.receiver import KubeletStatsReceiver, make_client

ROOT = Path(__file__).resolve().parents[1]
INTERVAL = 10.0  # the receiver's default collection_interval, seconds
GROUPS = {"default": ["node", "pod", "container"], "all": ["node", "pod", "container", "volume"]}


# --- the kubelet, in a child process ------------------------------------------------------


async def serve(pods: int, directory: Path) -> None:
    """Serves a `pods`-pod summary over HTTPS until stdin closes; prints its URL, CA file and
    token on one JSON line."""
    from tests.peers.kubelet_stats_server import TOKEN, KubeletStatsServer, busy_node_summary

    server = KubeletStatsServer(directory)
    server.body = json.dumps(busy_node_summary(pods)).encode()  # encoded once, not per read
    await server.start()
    print(json.dumps({"url": server.url, "ca": str(server.ca_file), "token": TOKEN}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop()


@contextlib.asynccontextmanager
async def kubelet_process(pods: int, directory: Path) -> AsyncIterator[dict[str, str]]:
    """A child process serving the stand-in kubelet; yields its URL, CA file and token."""
    args = [sys.executable, "-m", "bench.kubelet_stats_read", "--serve", str(pods)]
    args += ["--dir", str(directory)]
    proc = subprocess.Popen(
        args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = await asyncio.to_thread(proc.stdout.readline)
    try:
        yield json.loads(line)
    finally:
        proc.stdin.close()
        await asyncio.to_thread(proc.wait, 30)


# --- the measurement ----------------------------------------------------------------------


async def cpu_of(action: Callable[[], Any], reads: int) -> list[float]:
    """CPU seconds of each of `reads` calls of `action` (awaited when it returns a coroutine)."""
    out = []
    for _ in range(reads):
        started = time.process_time()
        result = action()
        if asyncio.iscoroutine(result):
            await result
        out.append(time.process_time() - started)
    return out


async def measure(pods: int, reads: int, groups: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kstats-", dir="/tmp") as tmp:
        async with kubelet_process(pods, Path(tmp)) as peer:
            token = Path(tmp) / "token"
            token.write_text(peer["token"])
            config = KubeletStatsReceiverConfig.model_validate(
                {
                    "endpoint": peer["url"],
                    "ca_file": peer["ca"],
                    "token_file": str(token),
                    "metric_groups": groups,
                }
            )
            settings = Settings.for_component(
                ComponentID.parse("kubelet_stats"), Kind.RECEIVER, SelfTelemetry()
            )
            client = make_client(config, {})
            receiver = KubeletStatsReceiver(settings, config, _Drop(), client=client)
            body = await client.summary()
            batch: Batch = await receiver.scrape()  # warm-up: the connection, the first set
            store, translator = SeriesStore(), Translator("otel", {})
            translator.ingest(store, batch, now=0.0)
            batches: list[Batch] = []

            async def read() -> None:
                batches.append(await receiver.scrape())

            read_cpu = await cpu_of(read, reads)
            clock = iter(range(1, reads + 1))
            ingest_cpu = await cpu_of(
                lambda: translator.ingest(store, batches.pop(), now=float(next(clock))), reads
            )
            loads_cpu = await cpu_of(lambda: json.loads(body), reads)
            await receiver.shutdown()
    return {
        "bytes": len(body),
        "resources": len(batch),
        "points": point_count(batch),
        "series": store.series_count(),
        "read": statistics.median(read_cpu),
        "ingest": statistics.median(ingest_cpu),
        "loads": statistics.median(loads_cpu),
    }


class _Drop:
    async def consume(self, batch: Batch) -> None:
        pass


def report(pods: int, m: dict[str, float]) -> str:
    share = m["read"] / INTERVAL * 100
    return (
        f"{pods} pods ({m['bytes'] / 1e3:.0f} KB, {m['resources']:.0f} resources, "
        f"{m['points']:.0f} points, {m['series']:.0f} series): CPU per read {m['read'] * 1e3:.1f} ms "
        f"= {share:.2f}% of a core at {INTERVAL:.0f} s; Prometheus ingest "
        f"{m['ingest'] * 1e3:.1f} ms; json.loads alone {m['loads'] * 1e3:.1f} ms "
        f"(read / loads {m['read'] / m['loads']:.1f}x)"
    )


async def main(args: argparse.Namespace) -> None:
    results = {}
    for pods in args.pods:
        results[pods] = await measure(pods, args.reads, GROUPS[args.groups])
        print(report(pods, results[pods]), flush=True)
    first = args.pods[0]
    m = results[first]
    target = "" if args.smoke else " (target: well under 1%)"
    print(
        f"KS CPU per read at {first} pods: {m['read'] * 1e3:.1f} ms, "
        f"{m['read'] / INTERVAL * 100:.2f}% of a core at the {INTERVAL:.0f} s interval{target}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[110, 5000])
    parser.add_argument("--reads", type=int, default=9)
    parser.add_argument("--groups", choices=sorted(GROUPS), default="default")
    parser.add_argument("--smoke", action="store_true", help="20 pods, 2 reads")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.serve is not None:
        asyncio.run(serve(parsed.serve, parsed.dir))
    else:
        if parsed.smoke:
            parsed.pods, parsed.reads = [20], 2
        asyncio.run(main(parsed))
