"""P5: `/metrics` latency while the pipeline's sources are slow, vs the same pipeline healthy.

Two agents run side by side, each in its own process: a receiver emits a batch every cycle, an
enrichment processor labels it from a snapshot it refreshes in the background (the way
`k8s_attributes` and `container_env` work), and the `prometheus` exporter serves the result.
In the *slow* agent, the pod-resources refresh answers in 2 s (a blocking call in a worker
thread), the containerd refresh hangs forever, and every cycle an unknown GPU triggers an extra
(slow) refresh. In the *healthy* agent every source answers at once. This process scrapes both
agents alternately over loopback, so both see the same machine noise, and compares p99s.

    python bench/p5_scrape_under_slow_sources.py [--series 10000] [--seconds 15]

The last line is the P5 verdict (target: slow p99 / healthy p99 at most 1.2).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import multiprocessing as mp
import statistics
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from p1_metrics_endpoint import make_batch, ms, percentile

from otelgpu.model import Batch, with_resource

CYCLE = 1.0  # seconds between batches


class EnrichingProcessor:
    """Pure `process(batch)` over a snapshot; sources are only touched by `refresh_loop`."""

    def __init__(self, slow: bool) -> None:
        self.slow = slow
        self.snapshot: dict[str, dict[str, str]] = {}
        self.refreshes = 0
        self._hang = threading.Event()  # containerd never answers in the slow agent

    def process(self, batch: Batch) -> Batch:
        return tuple(
            with_resource(rm, self.snapshot.get(str(rm.resource.get("hw.id")), {})) for rm in batch
        )

    def _pod_resources(self) -> dict[str, dict[str, str]]:
        if self.slow:
            time.sleep(2.0)  # the kubelet answers in 2 s
        return {f"GPU-{r:08d}": {"team": f"t{r % 5}"} for r in range(250)}

    def _containerd(self) -> None:
        if self.slow:
            self._hang.wait()  # hangs for good

    async def refresh_loop(self) -> None:
        asyncio.create_task(asyncio.to_thread(self._containerd))  # noqa: RUF006 - hangs by design
        while True:
            self.snapshot = await asyncio.to_thread(self._pod_resources)
            self.refreshes += 1
            await asyncio.sleep(CYCLE)

    async def unknown_device_refresh(self) -> None:
        """What an unseen GPU triggers (at most once per second)."""
        await asyncio.to_thread(self._pod_resources)


def run_agent(series: int, slow: bool, ready: mp.Queue) -> None:
    asyncio.run(_agent(series, slow, ready))


async def _agent(series: int, slow: bool, ready: mp.Queue) -> None:
    from otelgpu.component import ComponentID, Kind, Settings
    from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
    from otelgpu.exporters.prometheus.exporter import PrometheusExporter
    from otelgpu.telemetry import SelfTelemetry

    telemetry = SelfTelemetry()
    settings = Settings.for_component(ComponentID("prometheus"), Kind.EXPORTER, telemetry)
    exporter = PrometheusExporter(settings, PrometheusExporterConfig(endpoint="127.0.0.1:0"))

    class Host:
        def __init__(self) -> None:
            self.telemetry = telemetry

        def readiness(self) -> tuple[bool, list[str]]:
            return True, []

    await exporter.start(Host())
    processor = EnrichingProcessor(slow)
    refresher = asyncio.create_task(processor.refresh_loop())
    ready.put(exporter.port)
    # Built up front: the receiver's own cost is not what P5 measures.
    batches = [make_batch(series, cycle) for cycle in range(4)]
    cycle = 0
    while True:
        batch = batches[cycle % len(batches)]
        unknown = replace(batch[0], resource={**batch[0].resource, "hw.id": f"GPU-new-{cycle}"})
        asyncio.create_task(processor.unknown_device_refresh())  # noqa: RUF006
        await exporter.consume(processor.process((unknown, *batch[1:])))
        cycle += 1
        await asyncio.sleep(CYCLE)
    refresher.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()

    procs, conns = [], {}
    for name, slow in (("healthy", False), ("slow", True)):
        ready: mp.Queue = mp.Queue()
        proc = mp.Process(target=run_agent, args=(args.series, slow, ready), daemon=True)
        proc.start()
        procs.append(proc)
        conns[name] = http.client.HTTPConnection("127.0.0.1", int(ready.get(timeout=60)))
    times: dict[str, list[float]] = {name: [] for name in conns}
    sizes: dict[str, int] = {}
    try:
        time.sleep(3 * CYCLE)  # let both agents render and the slow sources start stalling
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            for name, conn in conns.items():
                start = time.perf_counter()
                conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
                sizes[name] = len(conn.getresponse().read())
                times[name].append(time.perf_counter() - start)
            time.sleep(0.002)
    finally:
        for proc in procs:
            proc.terminate()
            proc.join()

    print(f"series: {args.series}, {args.seconds:.0f} s of alternating gzip scrapes")
    for name, samples in times.items():
        print(
            f"{name:7}: p50 {ms(statistics.median(samples))}, p99 {ms(percentile(samples, 0.99))}, "
            f"max {ms(max(samples))} over {len(samples)} scrapes ({sizes[name] / 1024:.0f} KiB)"
        )
    ratio = percentile(times["slow"], 0.99) / percentile(times["healthy"], 0.99)
    verdict = "PASS" if ratio <= 1.2 else "FAIL"
    print(
        f"P5 {verdict}: p99 with pod-resources at 2 s and containerd hung / healthy p99 = "
        f"{ratio:.2f} (target at most 1.2)"
    )


if __name__ == "__main__":
    main()
