"""P2: CPU per point of one full cycle, vs a natural OpenTelemetry SDK agent on the same points.

Ours, per cycle, with the real components in this process (node: bench/node_fixture.py;
`--size 400`: 8 simulated GPUs, 3 MIG instances on each of the first 2, 2 processes per device,
500 pods, ~400 points; `--size 10k`: the same node with more processes per device, ~10k points):

    NvmlReceiver.scrape()                 simulated NVML, processes mapped through a /proc tree
    K8sAttributesProcessor.process        snapshot from an in-memory pod-resources client
    ContainerEnvProcessor.process         in-memory runtime, env TEAM/PROJECT + a pod label
    PrometheusExporter.consume + refresh  series store update, text render and gzip (the
                                          exporter does both once per update); scraped as
                                          Prometheus, the OpenMetrics body and its gzip too
    otlp request_of                       the request bytes (closing points included), as the
                                          otlp exporter makes them
                                          (uncompressed)

The baseline (`SdkAgent`) is an SDK agent written the natural way over the points ours
produced: one MeterProvider per resource, both an OTLP and a Prometheus reader, see its doc.

CPU is `time.process_time()` (every thread: the receiver's NVML worker included), over rounds
that alternate ours and the baseline; the medians are reported.

Each size is measured twice, once per kind of scraper (`--scraper`), because what a cycle
renders depends on who scrapes:

- `text`: a scraper that asks for the classic text format (curl, an older agent). Ours renders
  the classic body; the baseline `prometheus_client.generate_latest`.
- `prometheus`: Prometheus 2.x and 3.x, which ask for OpenMetrics first. Ours is told of such
  a scrape the way its server tells it (`PrometheusExporter.scraped`), and from then on each
  update renders the OpenMetrics body next to the classic one, as the agent does; the baseline
  renders `prometheus_client.openmetrics.exposition.generate_latest` instead of the classic
  text (the SDK's exporter answers in the format asked for). This is the figure that counts
  for a node Prometheus scrapes: the `text` one spares ours the second body it makes each cycle.

    python bench/p2_cycle_cpu.py [--size 400|10k|both] [--scraper text|prometheus|both]
                                 [--rounds 7] [--cycles 20] [--profile]
    python bench/p2_cycle_cpu.py --smoke          # tiny and quick: proves the benchmark runs
    # instruction counts: run twice with different --cycles and subtract (setup cancels out)
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p python3.11 \
        bench/p2_cycle_cpu.py --size 10k --only ours --cycles 5
    # or both sides counted by the benchmark itself, beside the CPU figures (minutes at 10k):
    python -m bench.p2_cycle_cpu --instructions [--instruction-cycles 3]

`--instructions` runs each side in a child under callgrind (`bench/callgrind.py`), its
instrumentation on only for `--instruction-cycles` cycles after the same start and warm-up
(what they built then frozen out of the collector's passes, both sides alike), and prints instructions per point of each and their ratio beside the CPU figure line: stable on a
busy machine where CPU time is not.

Target (TARGETS.md P2): ours <= 0.2 of the SDK agent per point, at both sizes. The figure lines
are printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import gzip
import io
import pstats
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as pb_service
from opentelemetry.proto.common.v1 import common_pb2 as pb_common
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricsData
from opentelemetry.sdk.metrics.export import Sum as SdkSum
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from bench import callgrind
from bench.node_fixture import Node
from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.encode import AttributeCache
from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.exporters.otlp.exporter import request_of
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.exporters.prometheus.server import OPENMETRICS
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, MetricKind, point_count
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from tests.fakes import FakeHost, Sink
from tests.unit.processors.k8s_attributes.fakes import (
    FakePodResources,
    allocatable,
    container,
    pod,
)

GZIP_LEVEL = 1  # what the Prometheus exporter uses (render.py)
TARGET = 0.2  # TARGETS.md P2: ours per point, at most this fraction of the SDK agent's
# Who scrapes: the name in the figure line, and the baseline's body for that scraper.
SCRAPERS: dict[str, tuple[str, Callable[[CollectorRegistry], bytes]]] = {
    "text": ("classic text", generate_latest),
    "prometheus": ("Prometheus (OpenMetrics)", generate_openmetrics),
}
SIZES = {
    "smoke": Node(gpus=2, mig_gpus=1, pods=10),
    "400": Node(),
    "10k": Node(gpus=16, mig_gpus=4, procs=150, sharers=4),
}


def _settings(name: str, kind: Kind, telemetry: SelfTelemetry) -> Settings:
    return Settings.for_component(ComponentID(name), kind, telemetry)


class Pipeline:
    """The real components of one pipeline, wired by hand so each stage can be timed."""

    def __init__(self, node: Node, host_proc: Path, telemetry: SelfTelemetry) -> None:
        self.host = FakeHost(telemetry)
        # A long interval: the receiver's own loop scrapes once at start, then we drive it.
        config = NvmlReceiverConfig.model_validate(node.receiver_config(host_proc, "1h"))
        self.sink = Sink()
        self.attributes = AttributeCache()  # as the otlp exporter keeps one across batches
        self.ended = EndedSeries()  # and what each identity sent last
        self.receiver = NvmlReceiver(_settings("nvml", Kind.RECEIVER, telemetry), config, self.sink)
        pods = FakePodResources()
        listed = node.pod_devices()
        pods.set(
            *(pod(ns, name, container("main", d), container("sidecar")) for ns, name, d in listed)
        )
        pods.devices = allocatable(node.allocatable())
        self.k8s = K8sAttributesProcessor(
            _settings("k8s_attributes", Kind.PROCESSOR, telemetry),
            K8sAttributesProcessorConfig.model_validate({"node_name": "gpu-node-1"}),
            client=pods,
        )
        runtime = node.fake_runtime()
        self.env = ContainerEnvProcessor(
            _settings("container_env", Kind.PROCESSOR, telemetry),
            ContainerEnvProcessorConfig.model_validate(
                {"runtime": "containerd", **node.container_env_options()}
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
        deadline = time.monotonic() + 300  # minutes under valgrind on a busy machine
        while time.monotonic() < deadline:
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
        return batch, otlp_bytes(batch, self.attributes, self.ended)


def otlp_bytes(batch: Batch, cache: AttributeCache, ended: EndedSeries) -> bytes:
    """What the otlp exporter does per batch: `request_of`'s wire bytes, the closing points
    of what ended included (its transports send them as they are)."""
    return request_of(batch, cache, ended)[0]


class SdkAgent:
    """A natural OpenTelemetry SDK agent over a fixed batch, the baseline.

    As one would write it with the SDK: one MeterProvider per resource (the resource attributes
    on its `Resource`, not copied onto every point), one observable instrument per metric
    whose callback yields an Observation per point (the point's own attributes), and two
    readers on every provider, as an agent exporting both ways runs them:

    - OTLP: a reader's `MetricsData` → `ExportMetricsServiceRequest` bytes. The SDK's own
      encoder lives in `opentelemetry-exporter-otlp-proto-common`, which the project does not
      depend on, so `_otlp_request` builds the same opentelemetry-proto messages from the
      reader's data, the way that encoder does;
    - Prometheus: a second reader's `MetricsData` → prometheus_client families (resource
      attributes as labels, as our body has them) → `generate_latest` (the classic text, or
      OpenMetrics for a Prometheus scraper: `render`), then gzip at the level ours uses (one
      body per cycle; the SDK agent would render per scrape).

    Each reader's collection runs the callbacks, as in the SDK. The values are fixed (no NVML
    is read), which favours the baseline.
    """

    def __init__(self, batch: Batch, render: Callable[[CollectorRegistry], bytes]) -> None:
        self.render = render
        self.otlp_readers: list[InMemoryMetricReader] = []
        self.prom_readers: list[InMemoryMetricReader] = []
        self.providers: list[MeterProvider] = []
        self.registry = CollectorRegistry()
        self.registry.register(_SdkCollector(self.prom_readers))
        for rm in batch:
            otlp, prom = InMemoryMetricReader(), InMemoryMetricReader()
            provider = MeterProvider(
                resource=Resource(dict(rm.resource)), metric_readers=[otlp, prom]
            )
            meter = provider.get_meter(rm.scope, rm.scope_version or None)
            for metric in rm.metrics:
                if metric.kind is MetricKind.GAUGE:
                    create: Callable[..., Any] = meter.create_observable_gauge
                elif metric.monotonic:
                    create = meter.create_observable_counter
                else:
                    create = meter.create_observable_up_down_counter
                points = [(p.value, dict(p.attributes)) for p in metric.points]
                create(
                    metric.name,
                    callbacks=[_callback(points)],
                    unit=metric.unit,
                    description=metric.description,
                )
            self.otlp_readers.append(otlp)
            self.prom_readers.append(prom)
            self.providers.append(provider)

    def cycle(self) -> tuple[bytes, bytes, bytes]:
        """One export each way: the OTLP request bytes, the Prometheus body and its gzip."""
        request = _otlp_request(self.otlp_readers).SerializeToString()
        body = self.render(self.registry)
        return request, body, gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)

    def points(self) -> int:
        return sum(
            len(m.data.data_points)
            for reader in self.otlp_readers
            for rm in _data(reader).resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        )

    def shutdown(self) -> None:
        for provider in self.providers:
            provider.shutdown()


def _data(reader: InMemoryMetricReader) -> MetricsData:
    data = reader.get_metrics_data()
    if data is None:
        raise RuntimeError("an SDK reader collected nothing")
    return data


def _otlp_request(readers: list[InMemoryMetricReader]) -> pb_service.ExportMetricsServiceRequest:
    """The reader's MetricsData as an OTLP request, message by message."""
    request = pb_service.ExportMetricsServiceRequest()
    for reader in readers:
        for rm in _data(reader).resource_metrics:
            out = request.resource_metrics.add()
            out.resource.attributes.extend(_key_values(rm.resource.attributes))
            for sm in rm.scope_metrics:
                scope = out.scope_metrics.add()
                scope.scope.name = sm.scope.name
                scope.scope.version = sm.scope.version or ""
                for metric in sm.metrics:
                    _otlp_metric(scope.metrics.add(), metric)
    return request


def _otlp_metric(out: Any, metric: Any) -> None:
    out.name, out.unit, out.description = metric.name, metric.unit or "", metric.description
    data = metric.data
    if isinstance(data, SdkSum):
        target = out.sum
        target.aggregation_temporality = data.aggregation_temporality.value
        target.is_monotonic = data.is_monotonic
    else:
        target = out.gauge
    for point in data.data_points:
        dp = target.data_points.add()
        dp.time_unix_nano = point.time_unix_nano
        if point.start_time_unix_nano:
            dp.start_time_unix_nano = point.start_time_unix_nano
        if isinstance(point.value, int):
            dp.as_int = point.value
        else:
            dp.as_double = point.value
        dp.attributes.extend(_key_values(point.attributes))


def _key_values(attributes: Any) -> list[pb_common.KeyValue]:
    out = []
    for key, value in (attributes or {}).items():
        if isinstance(value, bool):
            any_value = pb_common.AnyValue(bool_value=value)
        elif isinstance(value, int):
            any_value = pb_common.AnyValue(int_value=value)
        elif isinstance(value, float):
            any_value = pb_common.AnyValue(double_value=value)
        else:
            any_value = pb_common.AnyValue(string_value=str(value))
        out.append(pb_common.KeyValue(key=key, value=any_value))
    return out


class _SdkCollector(Collector):
    """The Prometheus reader's side: its MetricsData as prometheus_client families, the way
    the SDK's Prometheus exporter translates them (names and label names sanitized per
    collection), with the resource attributes as labels."""

    def __init__(self, readers: list[InMemoryMetricReader]) -> None:
        self._readers = readers

    def collect(self) -> Iterator[Any]:
        families: dict[str, Any] = {}
        for reader in self._readers:
            for rm in _data(reader).resource_metrics:
                resource = {_label(k): str(v) for k, v in rm.resource.attributes.items()}
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        _prom_points(families, resource, metric)
        yield from families.values()


def _prom_points(families: dict[str, Any], resource: dict[str, str], metric: Any) -> None:
    counter = isinstance(metric.data, SdkSum) and metric.data.is_monotonic
    name = _NOT_NAME.sub("_", metric.name)
    family = families.get(name)
    if family is None:
        cls = CounterMetricFamily if counter else GaugeMetricFamily
        family = families[name] = cls(name, metric.description, labels=None)
    for point in metric.data.data_points:
        labels = {**resource, **{_label(k): str(v) for k, v in point.attributes.items()}}
        family.samples.append(
            Sample(name + "_total" if counter else name, labels, point.value, None)
        )


_NOT_NAME = re.compile(r"[^a-zA-Z0-9_:]")


def _label(key: str) -> str:
    return _NOT_NAME.sub("_", key)


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

    async def prom_update() -> None:
        # a refresh with nothing consumed since the last one renders nothing (the body would
        # be the same bytes): the render is timed after a consume, as in a cycle
        await pipe.prometheus.consume(final)
        await pipe.prometheus.refresh()

    consume = await cpu_per_cycle(prom_consume, cycles)
    return {
        "nvml scrape (simulated)": await cpu_per_cycle(pipe.receiver.scrape, cycles),
        "k8s_attributes.process": await cpu_per_cycle(lambda: pipe.k8s.process(raw), cycles),
        "container_env.process": await cpu_per_cycle(lambda: pipe.env.process(labelled), cycles),
        "prometheus consume": consume,
        "prometheus render+gzip": await cpu_per_cycle(prom_update, cycles) - consume,
        "otlp request_of": await cpu_per_cycle(
            lambda: otlp_bytes(final, pipe.attributes, pipe.ended), cycles
        ),
    }


def describe(node: Node, batch: Batch, otlp: bytes, pipe: Pipeline) -> str:
    resources = len(batch)
    with_pod = sum(semconv.K8S_POD_NAME in rm.resource for rm in batch)
    with_env = sum("container.env.TEAM" in rm.resource for rm in batch)
    exposition = pipe.prometheus.exposition
    body = exposition.classic
    also = ""
    if exposition.converted:
        converted = exposition.openmetrics()
        also = f"; OpenMetrics body {len(converted.text())} B (gzip {len(converted.gzipped)} B)"
    return (
        f"node: {node.gpus} GPUs ({node.mig_gpus} with {node.mig_per_gpu} MIG instances), "
        f"{node.procs} processes per device, {node.pods} pods\n"
        f"cycle output: {resources} resources ({with_pod} with pod labels, {with_env} with "
        f"container env), {point_count(batch)} points; Prometheus body {len(body.text())} B "
        f"({body.series} series, gzip {len(body.gzipped)} B){also}; OTLP request {len(otlp)} B"
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


async def measure(size: str, args: argparse.Namespace) -> list[str]:
    """Runs one size; returns its figure lines, one per scraper (none in `--only` mode)."""
    node = SIZES[size]
    with tempfile.TemporaryDirectory(prefix="p2-proc-") as proc_dir:
        pipe = Pipeline(node, node.write_host_proc(Path(proc_dir)), SelfTelemetry())
        await pipe.start()
        try:
            return await run(node, size, pipe, args)
        finally:
            await pipe.shutdown()


async def run(node: Node, size: str, pipe: Pipeline, args: argparse.Namespace) -> list[str]:
    batch, otlp = await pipe.cycle()
    points = point_count(batch)
    again, _ = await pipe.cycle()
    if point_count(again) != points:
        raise RuntimeError(f"cycles differ: {points} points, then {point_count(again)}")
    lines = []
    # `text` first: once told of an OpenMetrics scrape, ours renders both for ten minutes.
    for scraper in ("text", "prometheus") if args.scraper == "both" else (args.scraper,):
        if scraper == "prometheus":
            await as_prometheus_scrapes(pipe)
        if args.only == "ours":
            for _ in range(args.cycles):
                await pipe.cycle()
            print(
                f"ours, scraped as {SCRAPERS[scraper][0]}: {args.cycles} cycles of {points} points"
            )
            continue
        sdk = SdkAgent(batch, SCRAPERS[scraper][1])
        try:
            line = await compare(node, size, scraper, pipe, sdk, (batch, otlp), args)
        finally:
            sdk.shutdown()
        if line is not None:
            lines.append(line)
    return lines


async def as_prometheus_scrapes(pipe: Pipeline) -> None:
    """Tells ours what its server tells it after Prometheus's scrape (OpenMetrics asked for),
    and checks that the next update renders the OpenMetrics body."""
    pipe.prometheus.scraped(200, OPENMETRICS)
    await pipe.cycle()
    if not pipe.prometheus.exposition.converted:
        raise RuntimeError("told of an OpenMetrics scrape, the exporter rendered no OpenMetrics")


async def compare(
    node: Node,
    size: str,
    scraper: str,
    pipe: Pipeline,
    sdk: SdkAgent,
    first: tuple[Batch, bytes],
    args: argparse.Namespace,
) -> str | None:
    batch, otlp = first
    points = point_count(batch)
    if sdk.points() != points:
        raise RuntimeError(f"the SDK agent exports {sdk.points()} points, ours {points}")
    if args.only == "sdk":
        for _ in range(args.cycles):
            sdk.cycle()
        print(f"sdk, scraped as {SCRAPERS[scraper][0]}: {args.cycles} cycles of {points} points")
        return None
    sdk_otlp, sdk_body, _ = sdk.cycle()
    for _ in range(2):  # warm-up: caches, label sets, the SDK's aggregations
        await pipe.cycle()
        sdk.cycle()
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(args.rounds):
        ours.append(await cpu_per_cycle(pipe.cycle, args.cycles) / points)
        theirs.append(await cpu_per_cycle(sdk.cycle, args.cycles) / points)
    who = SCRAPERS[scraper][0]
    if pipe.prometheus.exposition.classic.holds_plain:  # `.text()` below, not `.plain`
        raise RuntimeError("ours held plain bodies, which no scraper of P2 asks for")
    print(f"--- size {size}, scraped as {who}")
    print(describe(node, batch, otlp, pipe))
    print(f"SDK agent: OTLP request {len(sdk_otlp)} B, Prometheus body {len(sdk_body)} B")
    if not args.smoke:
        breakdown = await stages(pipe, args.cycles)
        print(f"CPU per cycle by stage (each alone, {args.cycles} cycles):")
        for name, seconds in breakdown.items():
            print(f"  {name:<26} {seconds * 1e6:9.1f} µs  ({seconds / points * 1e6:6.2f} µs/pt)")
    if args.profile:
        print(await profile(pipe, args.cycles))
    mine, base = statistics.median(ours), statistics.median(theirs)
    print(
        f"ours: {mine * 1e6:.2f} µs/point (rounds {', '.join(f'{t * 1e6:.2f}' for t in ours)})\n"
        f"SDK agent: {base * 1e6:.2f} µs/point "
        f"(rounds {', '.join(f'{t * 1e6:.2f}' for t in theirs)})"
    )
    ratio = mine / base
    verdict = "met" if ratio <= TARGET else "MISSED"
    line = (
        f"P2 at {points} points, scraped as {who}: ours {mine * 1e6:.2f} µs/pt vs SDK agent "
        f"{base * 1e6:.2f} µs/pt = {ratio:.3f} (median of {args.rounds} x {args.cycles} cycles; "
        f"target <= {TARGET}: {verdict})"
    )
    if args.instructions:
        line += "; " + instructions_beside(size, scraper, args.instruction_cycles)
    return line


def instructions_beside(size: str, scraper: str, cycles: int) -> str:
    """Instructions per point of `cycles` cycles of each side, each in a child under
    callgrind, and their ratio."""
    counts = {}
    for side in ("ours", "sdk"):
        arguments = ["-m", "bench.p2_cycle_cpu", "--child", side, "--size", size]
        arguments += ["--scraper", scraper, "--cycles", str(cycles)]
        counted, reply = callgrind.counted(arguments)
        counts[side] = counted / (cycles * int(reply.split()[1]))
    ratio = counts["ours"] / counts["sdk"]
    return (
        f"instructions: ours {counts['ours']:.0f}/pt vs SDK agent {counts['sdk']:.0f}/pt = "
        f"{ratio:.3f} ({cycles} cycles each under callgrind)"
    )


async def child(args: argparse.Namespace) -> None:
    """One side (`--child ours|sdk`) for `instructions_beside`: started and warmed up as in
    `compare`, then `--cycles` cycles between the gate's `ready` and `done`."""
    node = SIZES[args.size]
    with tempfile.TemporaryDirectory(prefix="p2-proc-") as proc_dir:
        pipe = Pipeline(node, node.write_host_proc(Path(proc_dir)), SelfTelemetry())
        await pipe.start()
        try:
            batch, _ = await pipe.cycle()
            if args.scraper == "prometheus":
                await as_prometheus_scrapes(pipe)
            run: Callable[[], Awaitable[object] | object] = pipe.cycle
            sdk = None
            if args.child == "sdk":
                sdk = SdkAgent(batch, SCRAPERS[args.scraper][1])
                run = sdk.cycle
            try:
                for _ in range(3):  # warm-up: caches, label sets, the SDK's aggregations
                    await _done(run())
                # What the start and warm-up built leaves the collector's passes (as the agent
                # does after its start, otelgpu/service/heap.py): a full pass that happened to
                # fall in the few counted cycles would walk all of it and swamp the count.
                gc.collect()
                gc.freeze()
                callgrind.gate("ready")
                for _ in range(args.cycles):
                    await _done(run())
                callgrind.gate(f"done points {point_count(batch)}")
            finally:
                if sdk is not None:
                    sdk.shutdown()
        finally:
            await pipe.shutdown()


async def _done(result: Awaitable[object] | object) -> None:
    if asyncio.iscoroutine(result):
        await result


async def main(args: argparse.Namespace) -> None:
    if args.child:
        await child(args)
        return
    sizes = ["smoke"] if args.smoke else ["400", "10k"] if args.size == "both" else [args.size]
    lines = [line for size in sizes for line in await measure(size, args)]
    for line in lines:
        print(line)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=["400", "10k", "both", "smoke"], default="both")
    parser.add_argument(
        "--scraper",
        choices=["text", "prometheus", "both"],
        default="both",
        help="who scrapes: a classic-text scraper, Prometheus (OpenMetrics first), or each in turn",
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument(
        "--only",
        choices=["ours", "sdk"],
        help="run only `--cycles` cycles of one side, no timing (for callgrind)",
    )
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the cycle")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count instructions per point of both sides under callgrind (minutes)",
    )
    parser.add_argument("--instruction-cycles", type=int, default=3)
    parser.add_argument("--child", choices=["ours", "sdk"], help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="a tiny node, 1 round of 2 cycles")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.cycles = 1, 2
    return args


if __name__ == "__main__":
    asyncio.run(main(_args()))
