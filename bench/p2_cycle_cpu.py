"""P2: CPU per point of one full cycle, vs the OpenTelemetry Python SDK path on the same points.

Ours, per cycle, with the real components in this process (node: bench/node_fixture.py,
8 simulated GPUs, 3 MIG instances on each of the first 2, 2 processes per device, 500 pods):

    NvmlReceiver.scrape()                 simulated NVML, processes mapped through a /proc tree
    K8sAttributesProcessor.process        snapshot from an in-memory pod-resources client
    ContainerEnvProcessor.process         in-memory runtime, env TEAM/PROJECT + a pod label
    PrometheusExporter.consume + refresh  series store update, text render and gzip (the
                                          exporter does both once per update)
    otlp encode_bytes                     the ExportMetricsServiceRequest bytes (uncompressed)

The baseline gets the points ours produced (same values, attributes = resource attributes
merged with point attributes, merged once up front so the SDK is not charged for it): one
observable instrument per metric name whose callback yields an Observation per point, a
MeterProvider with an InMemoryMetricReader, `get_metrics_data()`, then `encode_metrics(...)
.SerializeToString()`. It reads no NVML and renders no Prometheus body, so the comparison
favours the baseline.

CPU is `time.process_time()` (every thread: the receiver's NVML worker included), over rounds
that alternate ours and the baseline; the medians are reported.

    python bench/p2_cycle_cpu.py [--rounds 7] [--cycles 40] [--profile]

Target: ours ≤ 1/4 of the SDK path per point. The figure line is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from bench.node_fixture import Node
from otelgpu import semconv
from otelgpu.component import ComponentID, Kind, Settings
from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.model import Batch, MetricKind, point_count
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.telemetry import SelfTelemetry
from tests.fakes import FakeHost, Sink
from tests.unit.processors.k8s_attributes.fakes import (
    FakePodResources,
    allocatable,
    container,
    pod,
)

NODE = Node()


def _settings(name: str, kind: Kind, telemetry: SelfTelemetry) -> Settings:
    return Settings.for_component(ComponentID(name), kind, telemetry)


class Pipeline:
    """The real components of one pipeline, wired by hand so each stage can be timed."""

    def __init__(self, host_proc: Path, telemetry: SelfTelemetry) -> None:
        self.host = FakeHost(telemetry)
        # A long interval: the receiver's own loop scrapes once at start, then we drive it.
        config = NvmlReceiverConfig.model_validate(NODE.receiver_config(host_proc, "1h"))
        self.sink = Sink()
        self.attributes = AttributeCache()  # as the otlp exporter keeps one across batches
        self.receiver = NvmlReceiver(_settings("nvml", Kind.RECEIVER, telemetry), config, self.sink)
        pods = FakePodResources()
        listed = NODE.pod_devices()
        pods.set(
            *(pod(ns, name, container("main", d), container("sidecar")) for ns, name, d in listed)
        )
        pods.devices = allocatable(NODE.allocatable())
        self.k8s = K8sAttributesProcessor(
            _settings("k8s_attributes", Kind.PROCESSOR, telemetry),
            K8sAttributesProcessorConfig.model_validate({"node_name": "gpu-node-1"}),
            client=pods,
        )
        runtime = NODE.fake_runtime()
        self.env = ContainerEnvProcessor(
            _settings("container_env", Kind.PROCESSOR, telemetry),
            ContainerEnvProcessorConfig.model_validate(
                {"runtime": "containerd", **NODE.container_env_options()}
            ),
            lambda _config: [(runtime, True)],
        )
        self.prometheus = PrometheusExporter(
            _settings("prometheus", Kind.EXPORTER, telemetry),
            PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0"}),
        )

    async def start(self) -> None:
        """Starts the receiver and processors and waits until both snapshots are in."""
        await self.receiver.start(self.host)
        await self.k8s.start(self.host)
        await self.env.start(self.host)
        await self.env.refresh()  # publishes the runtime snapshot now
        for _ in range(1000):
            # The receiver's own first scrape done (it only primes GPM), and the kubelet's.
            if self.k8s.snapshot is not None and self.sink.batches:
                return
            await asyncio.sleep(0.01)
        raise RuntimeError("the first scrape or the pod-resources snapshot never arrived")

    async def shutdown(self) -> None:
        await self.receiver.shutdown()
        await self.k8s.shutdown()
        await self.env.shutdown()
        await self.prometheus.shutdown()

    async def cycle(self) -> tuple[Batch, bytes]:
        """One full cycle; returns the exported batch and the OTLP request bytes."""
        batch = await self.receiver.scrape()
        batch = self.env.process(self.k8s.process(batch))
        await self.prometheus.consume(batch)
        await self.prometheus.refresh()
        return batch, encode_bytes(batch, self.attributes)


class SdkPath:
    """The OpenTelemetry SDK path over a fixed batch: observable instruments → OTLP bytes."""

    def __init__(self, batch: Batch) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])
        meter = self.provider.get_meter("otelgpu.bench")
        by_name: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        kinds: dict[str, tuple[MetricKind, bool, str, str]] = {}
        for rm in batch:
            for metric in rm.metrics:
                kinds[metric.name] = (
                    metric.kind,
                    metric.monotonic,
                    metric.unit,
                    metric.description,
                )
                points = by_name.setdefault(metric.name, [])
                points += [(p.value, {**rm.resource, **p.attributes}) for p in metric.points]
        for name, points in by_name.items():
            kind, monotonic, unit, description = kinds[name]
            if kind is MetricKind.GAUGE:
                create: Callable[..., Any] = meter.create_observable_gauge
            elif monotonic:
                create = meter.create_observable_counter
            else:
                create = meter.create_observable_up_down_counter
            create(name, callbacks=[_callback(points)], unit=unit, description=description)

    def cycle(self) -> bytes:
        data = self.reader.get_metrics_data()
        assert data is not None
        body: bytes = encode_metrics(data).SerializeToString()
        return body

    def points(self) -> int:
        data = self.reader.get_metrics_data()
        assert data is not None
        return sum(
            len(m.data.data_points)
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        )


def _callback(
    points: list[tuple[float, dict[str, Any]]],
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, attributes) for value, attributes in points]

    return observe


async def cpu_per_cycle(run: Callable[[], Awaitable[object] | object], cycles: int) -> float:
    started = time.process_time()
    for _ in range(cycles):
        result = run()
        if asyncio.iscoroutine(result):
            await result
    return (time.process_time() - started) / cycles


async def stages(pipe: Pipeline, cycles: int) -> dict[str, float]:
    """CPU per cycle of each stage on its own (for the lead: where the time goes)."""
    raw = await pipe.receiver.scrape()
    labelled = pipe.k8s.process(raw)
    final = pipe.env.process(labelled)

    async def prom_consume() -> None:
        await pipe.prometheus.consume(final)

    return {
        "nvml scrape (simulated)": await cpu_per_cycle(pipe.receiver.scrape, cycles),
        "k8s_attributes.process": await cpu_per_cycle(lambda: pipe.k8s.process(raw), cycles),
        "container_env.process": await cpu_per_cycle(lambda: pipe.env.process(labelled), cycles),
        "prometheus consume": await cpu_per_cycle(prom_consume, cycles),
        "prometheus render+gzip": await cpu_per_cycle(pipe.prometheus.refresh, cycles),
        "otlp encode_bytes": await cpu_per_cycle(
            lambda: encode_bytes(final, AttributeCache()), cycles
        ),
    }


def describe(batch: Batch, otlp: bytes, pipe: Pipeline) -> str:
    resources = len(batch)
    with_pod = sum(semconv.K8S_POD_NAME in rm.resource for rm in batch)
    with_env = sum("container.env.TEAM" in rm.resource for rm in batch)
    body = pipe.prometheus.body
    return (
        f"node: {NODE.gpus} GPUs ({NODE.mig_gpus} with {NODE.mig_per_gpu} MIG instances), "
        f"{NODE.procs} processes per device, {NODE.pods} pods\n"
        f"cycle output: {resources} resources ({with_pod} with pod labels, {with_env} with "
        f"container env), {point_count(batch)} points; Prometheus body {len(body.plain)} B "
        f"({body.series} series, gzip {len(body.gzipped)} B); OTLP request {len(otlp)} B"
    )


async def profile(pipe: Pipeline, cycles: int) -> str:
    """The top of a cProfile of `cycles` full cycles (this thread only: the NVML worker
    thread's calls show up as the wait for its future)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(cycles):
        await pipe.cycle()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(18)
    return out.getvalue()


async def main(args: argparse.Namespace) -> None:
    telemetry = SelfTelemetry()
    with tempfile.TemporaryDirectory(prefix="p2-proc-") as proc_dir:
        pipe = Pipeline(NODE.write_host_proc(Path(proc_dir)), telemetry)
        await pipe.start()
        try:
            await run(pipe, args)
        finally:
            await pipe.shutdown()


async def run(pipe: Pipeline, args: argparse.Namespace) -> None:
    batch, otlp = await pipe.cycle()
    points = point_count(batch)
    again, _ = await pipe.cycle()
    if point_count(again) != points:
        raise RuntimeError(f"cycles differ: {points} points, then {point_count(again)}")
    sdk = SdkPath(batch)
    sdk_points = sdk.points()
    if sdk_points != points:
        raise RuntimeError(f"the SDK path exports {sdk_points} points, ours {points}")
    for _ in range(3):  # warm-up: caches, label sets, the SDK's aggregations
        await pipe.cycle()
        sdk.cycle()
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(args.rounds):
        ours.append(await cpu_per_cycle(pipe.cycle, args.cycles) / points)
        theirs.append(await cpu_per_cycle(sdk.cycle, args.cycles) / points)
    breakdown = await stages(pipe, args.cycles)
    sdk.provider.shutdown()
    print(describe(batch, otlp, pipe))
    print(f"CPU per cycle by stage (each alone, {args.cycles} cycles):")
    for name, seconds in breakdown.items():
        print(f"  {name:<26} {seconds * 1e6:9.1f} µs  ({seconds / points * 1e6:6.2f} µs/point)")
    if args.profile:
        print(await profile(pipe, args.cycles))
    mine, base = statistics.median(ours), statistics.median(theirs)
    print(
        f"ours: {mine * 1e6:.2f} µs/point (rounds {', '.join(f'{t * 1e6:.2f}' for t in ours)})\n"
        f"OTel SDK path: {base * 1e6:.2f} µs/point "
        f"(rounds {', '.join(f'{t * 1e6:.2f}' for t in theirs)})"
    )
    ratio = mine / base
    verdict = "met" if ratio <= 0.25 else "MISSED"
    print(
        f"P2 CPU per point, full cycle: ours {mine * 1e6:.2f} µs vs OTel SDK {base * 1e6:.2f} µs "
        f"= {ratio:.3f} of the SDK path ({points} points/cycle, median of {args.rounds} x "
        f"{args.cycles} cycles; target <= 0.25: {verdict})"
    )


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the cycle")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_args()))
