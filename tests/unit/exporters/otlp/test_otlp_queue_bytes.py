"""The sending queue bounded by what it holds in memory (`sizer: bytes`, the default).

Batches wait in the queue as their encoded request, gzipped, so a queue of B bytes holds B
bytes of requests (one object each) and nothing of the batches' model objects. With the
endpoint unreachable, the queue fills to its budget, the batches after that are refused and
their points counted as failed, and shutdown counts the rest: every point exactly once.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import os
import tracemalloc
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.errors import ExportError
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.confighttp.compression import gzip_bytes
from otelgpu.exporterhelper.config import DEFAULT_QUEUE_BYTES
from otelgpu.exporterhelper.queue import BatchQueue, Item, by_bytes
from otelgpu.exporters.otlp.config import OtlpExporterConfig, OtlpHttpExporterConfig
from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes
from otelgpu.exporters.otlp.exporter import ExportResponse, OtlpExporter
from otelgpu.exporters.otlp.http_client import HttpTransport
from otelgpu.exporters.otlp.resource import service_attributes
from otelgpu.pdata.model import (
    Batch,
    Metric,
    MetricKind,
    NumberDataPoint,
    ResourceMetrics,
    point_count,
)
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import (
    T0,
    failed,
    gpu_resource,
    numbered_request,
    queue_size,
    sent,
)
from tests.unit.exporters.otlp.test_otlp_exporter import ScriptedTransport, make

ID = "otlp_http"
# Only turns a consumer that never waits to retry (a broken build) into a failure, not a hang.
HANG = 120.0
UNREACHABLE = "http://127.0.0.1:1"  # nothing listens on port 1: every connection is refused
BUDGET = 256 << 10
# What the exporter may hold besides the queued bytes: the caches, which reach their size with
# the first batch, and the consumer's wait (the request in flight was encoded before tracing).
SLACK = 32 << 10


def pod_batch(cycle: int, pods: int = 40, per_pod: int = 25) -> Batch:
    """One collection of a node: per pod, a process resource with its pod's labels and
    `per_pod` points with attributes, the same label sets every cycle (as the receiver and the
    enrichment give them), values and times that change."""
    return tuple(
        ResourceMetrics(
            resource=gpu_resource(
                pod % 8,
                **{
                    "k8s.namespace.name": f"team-{pod % 5}",
                    "k8s.pod.name": f"trainer-{pod:04d}-7d9f8c6b5-x2x4q",
                    "k8s.container.name": "main",
                    "container.id": f"{pod:064x}",
                    "process.pid": 200_000 + pod,
                },
            ),
            metrics=(
                Metric(
                    name="hw.gpu.memory.usage",
                    unit="By",
                    description="GPU memory in use",
                    kind=MetricKind.GAUGE,
                    points=tuple(
                        NumberDataPoint(
                            attributes={"hw.gpu.memory.state": "used", "slot": i},
                            time_unix_nano=T0 + cycle * 10**9,
                            value=float(cycle * 1000 + i),
                        )
                        for i in range(per_pod)
                    ),
                ),
            ),
        )
        for pod in range(pods)
    )


def test_bytes_is_the_default_sizer_with_a_budget_in_bytes() -> None:
    for config in (OtlpExporterConfig(), OtlpHttpExporterConfig()):
        queue = config.sending_queue
        assert (queue.sizer, queue.queue_size) == ("bytes", DEFAULT_QUEUE_BYTES)
    # Room for a few minutes of a 10k-series node (~17-35 bytes a point, gzipped), and no
    # more than a 7k-series agent with a full queue can add and stay under 100 MiB.
    assert 4 << 20 <= DEFAULT_QUEUE_BYTES <= 12 << 20


@pytest.mark.parametrize(
    ("options", "sizer", "size"),
    [
        ({"queue_size": 5000}, "items", 5000),  # written without a sizer: points
        ({"sizer": "items"}, "items", 100_000),
        ({"sizer": "requests", "queue_size": 7}, "requests", 7),
        ({"sizer": "bytes"}, "bytes", DEFAULT_QUEUE_BYTES),
        ({"sizer": "bytes", "queue_size": 1 << 20}, "bytes", 1 << 20),
    ],
)
def test_the_sizer_and_queue_size_read_as_written(
    options: dict[str, Any], sizer: str, size: int
) -> None:
    queue = OtlpHttpExporterConfig.model_validate({"sending_queue": options}).sending_queue
    assert (queue.sizer, queue.queue_size) == (sizer, size)


def test_a_bytes_queue_weighs_each_request_by_its_length() -> None:
    small, large = numbered_request(0, 2), numbered_request(1, 20)
    queue = BatchQueue(len(small) + len(large), weigh=by_bytes)
    assert queue.offer(Item(small, 2)) and queue.offer(Item(large, 20))
    assert queue.size == len(small) + len(large)
    assert not queue.offer(Item(numbered_request(2, 1), 1))  # one byte more is refused


async def test_a_full_queue_holds_its_budget_in_memory_and_counts_every_refused_point(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    waiting = asyncio.Event()  # the consumer waits to retry: it holds one batch in flight

    async def sleep(seconds: float) -> None:
        waiting.set()
        await clock.sleep(seconds)

    config: Any = OtlpHttpExporterConfig.model_validate(
        {"endpoint": UNREACHABLE, "sending_queue": {"sizer": "bytes", "queue_size": BUDGET}}
    )
    settings = make_settings(ID, Kind.EXPORTER, telemetry)
    exporter = OtlpExporter(
        settings, config, HttpTransport(config), sleep=sleep, monotonic=clock.monotonic
    )
    batches = [pod_batch(cycle) for cycle in range(2)]
    points = point_count(batches[0])
    request = len(encode_bytes(batches[0]))
    packed = max(len(gzip_bytes(encode_bytes(b))) for b in batches) * 11 // 10  # + service.*
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(batches[0])  # handed to the consumer, which fails and will retry
    async with asyncio.timeout(HANG):
        await waiting.wait()
    consumed = points
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        refused = 0
        while refused < 3:  # well past full: every batch after that is refused
            await exporter.consume(batches[consumed // points % 2])
            consumed += points
            refused = int(failed(telemetry, ID)) // points
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    queued = queue_size(telemetry, ID)  # the gauge is in the sizer's unit: bytes
    assert BUDGET - packed < queued <= BUDGET  # full: the next batch did not fit
    assert held <= BUDGET + SLACK, f"{held} bytes held for a queue of {queued}"
    # gzipped: several times more points than the same budget of protobuf bytes would hold
    assert packed * 5 < request
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (0, refused * points)
    await exporter.shutdown()  # the endpoint is still down: the rest is counted too
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (0, consumed)
    assert queue_size(telemetry, ID) == 0


async def test_a_queued_request_is_sent_as_it_was_encoded(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Held gzipped while it waits, a request reaches the transport byte for byte as encoded."""
    gate = asyncio.Event()
    transport = ScriptedTransport(gate)
    exporter = make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(pod_batch(0))  # handed over: sent as it is
    await exporter.consume(pod_batch(1))  # queued: gzipped
    await exporter.consume(pod_batch(2))
    queued = queue_size(telemetry, "otlp")
    gate.set()
    await clock.advance(0)
    await exporter.shutdown()
    cache = AttributeCache(resource_defaults=service_attributes(os.environ))  # as in start()
    assert transport.raw == [encode_bytes(pod_batch(cycle), cache) for cycle in range(3)]
    assert queued == sum(len(gzip_bytes(raw)) for raw in transport.raw[1:])
    assert queued < sum(map(len, transport.raw[1:])) // 5
    assert sent(telemetry, "otlp") == 3 * point_count(pod_batch(0))


class FailsOnce:
    """A transport whose first export fails (retryable) and the next succeed; it keeps only a
    digest of each request, so that memory traced is the exporter's."""

    def __init__(self) -> None:
        self.digests: list[bytes] = []

    async def open(self) -> None:
        pass

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        self.digests.append(hashlib.sha256(request).digest())
        if len(self.digests) == 1:
            raise ExportError("connection refused", retryable=True)
        return ExportResponse()

    async def close(self) -> None:
        pass


async def test_a_batch_waiting_to_retry_is_held_gzipped(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    waiting = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waiting.set()
        await clock.sleep(seconds)

    transport = FailsOnce()
    exporter = make(telemetry, clock, transport, sleep=sleep)
    await exporter.start(FakeHost(telemetry))
    batch = pod_batch(0, per_pod=250)
    request = len(encode_bytes(batch))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        await exporter.consume(batch)  # handed to the idle consumer: its first attempt fails
        async with asyncio.timeout(HANG):
            await waiting.wait()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < request // 4, f"{held} bytes held for a request of {request}"
    await clock.advance(60)  # the retry: the same bytes again
    await exporter.shutdown()
    assert len(transport.digests) == 2 and transport.digests[0] == transport.digests[1]
    assert (sent(telemetry, "otlp"), failed(telemetry, "otlp")) == (point_count(batch), 0)
