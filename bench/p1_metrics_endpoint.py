"""P1: `/metrics` at 10k series, p99, vs `prometheus_client.generate_latest` of the same series.

The exporter runs in a child process (its own event loop and GIL, like the agent); this process
scrapes it over loopback with a keep-alive connection and times whole requests, response read
to the last byte. That is the server time plus the client's own overhead, so it overstates the
server time. The baseline renders the same 10k series with `prometheus_client`'s
`generate_latest` (a custom collector over the same values: its cheapest path) in this process,
in the same run.

    python bench/p1_metrics_endpoint.py [--series 10000] [--requests 1000]

Prints the figures; the last line is the P1 verdict (target: at least 10x faster, p99 at most 5 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from otelgpu import semconv
from otelgpu.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics

METRICS_PER_RESOURCE = 40


def make_batch(series: int, cycle: int = 0) -> Batch:
    """`series` gauges: 40 metrics per resource, 8 resource attributes (GPU + holder)."""
    resources = []
    for r in range(series // METRICS_PER_RESOURCE):
        resource = {
            semconv.HW_ID: f"GPU-{r:08d}-1111-2222-3333-444444444444",
            semconv.HW_NAME: f"nvidia{r % 8}",
            semconv.HW_MODEL: "NVIDIA H100 80GB HBM3",
            semconv.GPU_INDEX: str(r % 8),
            semconv.HOST_NAME: "gpu-node-1",
            semconv.K8S_POD_NAME: f"train-{r}",
            semconv.K8S_NAMESPACE_NAME: f"team-{r % 17}",
            semconv.K8S_CONTAINER_NAME: "trainer",
        }
        metrics = tuple(
            Metric(
                name=f"nvidia.gpu.bench.metric{m}",
                unit="1",
                description=f"bench metric {m}",
                kind=MetricKind.GAUGE,
                points=(
                    NumberDataPoint(
                        attributes={}, time_unix_nano=1, value=(r * 31 + m + cycle) % 100 / 100
                    ),
                ),
            )
            for m in range(METRICS_PER_RESOURCE)
        )
        resources.append(ResourceMetrics(resource=resource, metrics=metrics))
    return tuple(resources)


class BatchCollector(Collector):
    """prometheus_client's view of the same batch: one GaugeMetricFamily per metric name."""

    def __init__(self, batch: Batch) -> None:
        self._batch = batch

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families: dict[str, GaugeMetricFamily] = {}
        for rm in self._batch:
            names = [k.replace(".", "_") for k in rm.resource]
            values = [str(v) for v in rm.resource.values()]
            for metric in rm.metrics:
                name = metric.name.replace(".", "_") + "_ratio"
                family = families.get(name)
                if family is None:
                    family = families[name] = GaugeMetricFamily(
                        name, metric.description, labels=names
                    )
                for point in metric.points:
                    family.add_metric(values, point.value)
        yield from families.values()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def serve(series: int, ready: mp.Queue, **config: object) -> None:
    """Child process: an exporter holding `series` series, serving until terminated."""
    asyncio.run(_serve(series, ready, config))


async def _serve(series: int, ready: mp.Queue, config: dict[str, object]) -> None:
    from otelgpu.component import ComponentID, Kind, Settings
    from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
    from otelgpu.exporters.prometheus.exporter import PrometheusExporter
    from otelgpu.telemetry import SelfTelemetry

    telemetry = SelfTelemetry()
    settings = Settings.for_component(ComponentID("prometheus"), Kind.EXPORTER, telemetry)
    cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0", **config})
    exporter = PrometheusExporter(settings, cfg)

    class Host:
        def __init__(self) -> None:
            self.telemetry = telemetry

        def readiness(self) -> tuple[bool, list[str]]:
            return True, []

    await exporter.start(Host())
    await exporter.consume(make_batch(series))
    await exporter.refresh()
    ready.put(exporter.port)
    await asyncio.Event().wait()


def start_server(series: int, **config: object) -> tuple[mp.Process, int]:
    ready: mp.Queue = mp.Queue()
    proc = mp.Process(target=serve, args=(series, ready), kwargs=config, daemon=True)
    proc.start()
    return proc, int(ready.get(timeout=60))


def scrape_times(port: int, requests: int, encoding: str) -> tuple[list[float], int]:
    """Wall seconds of `requests` keep-alive GETs, and the body size."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    times, size = [], 0
    for _ in range(requests):
        start = time.perf_counter()
        conn.request("GET", "/metrics", headers={"Accept-Encoding": encoding})
        response = conn.getresponse()
        size = len(response.read())
        times.append(time.perf_counter() - start)
    conn.close()
    return times, size


def baseline_times(series: int, runs: int) -> list[float]:
    registry = CollectorRegistry()
    registry.register(BatchCollector(make_batch(series)))
    generate_latest(registry)  # warm up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        generate_latest(registry)
        times.append(time.perf_counter() - start)
    return times


def render_times(series: int, runs: int) -> tuple[list[float], list[float]]:
    """In-process cost of the update path: consume (translate) and render (text + gzip)."""
    from otelgpu.exporters.prometheus.render import encode, render_text
    from otelgpu.exporters.prometheus.series import SeriesStore
    from otelgpu.exporters.prometheus.translate import Translator

    store, translator = SeriesStore(), Translator("otel", {})
    consume, render = [], []
    for cycle in range(runs):
        batch = make_batch(series, cycle)
        start = time.perf_counter()
        translator.ingest(store, batch, now=float(cycle))
        consume.append(time.perf_counter() - start)
        start = time.perf_counter()
        encode(*render_text(store.families.values()))
        render.append(time.perf_counter() - start)
    return consume, render


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--baseline-runs", type=int, default=30)
    args = parser.parse_args()

    proc, port = start_server(args.series)
    try:
        scrape_times(port, 50, "identity")  # warm up
        plain, plain_size = scrape_times(port, args.requests, "identity")
        zipped, zipped_size = scrape_times(port, args.requests, "gzip")
    finally:
        proc.terminate()
        proc.join()
    baseline = baseline_times(args.series, args.baseline_runs)
    consume, render = render_times(args.series, 10)

    print(f"series: {args.series}, cpus: {os.cpu_count()}, python {sys.version.split()[0]}")
    for label, times, size in (("plain", plain, plain_size), ("gzip", zipped, zipped_size)):
        print(
            f"/metrics {label:5} ({size / 1024:.0f} KiB): p50 {ms(statistics.median(times))}, "
            f"p99 {ms(percentile(times, 0.99))}, max {ms(max(times))} over {len(times)} requests"
        )
    base99 = percentile(baseline, 0.99)
    print(
        f"prometheus_client.generate_latest: p50 {ms(statistics.median(baseline))}, "
        f"p99 {ms(base99)} over {len(baseline)} runs"
    )
    print(
        f"update path (once per batch, not per scrape): consume p50 "
        f"{ms(statistics.median(consume))}, render+gzip p50 {ms(statistics.median(render))}"
    )
    worst = max(percentile(plain, 0.99), percentile(zipped, 0.99))
    ratio = base99 / worst
    verdict = "PASS" if ratio >= 10 and worst <= 0.005 else "FAIL"
    print(
        f"P1 {verdict}: /metrics p99 {ms(worst)} (worse of plain/gzip) vs generate_latest p99 "
        f"{ms(base99)}: {ratio:.1f}x faster (target >= 10x, p99 <= 5 ms)"
    )


if __name__ == "__main__":
    main()
