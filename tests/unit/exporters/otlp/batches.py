"""Batches built by hand in the shape the nvml receiver emits, self-telemetry readers, a
transport that records what it is sent, and sending-queue items and consumers."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporterhelper.queue import BatchQueue, Item
from otelgpu.exporters.otlp.encode import encode_bytes
from otelgpu.exporters.otlp.exporter import ExportResponse, Transport
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics

T0 = 1_700_000_000_000_000_000
START = 1_699_999_000_000_000_000
INTERVAL = 10_000_000_000  # ten seconds between cycles, in ns


def gpu_resource(
    index: int, **extra: str | int | float | bool
) -> dict[str, str | int | float | bool]:
    """The resource attributes of one GPU, as the nvml receiver sets them."""
    return {
        semconv.HW_ID: f"GPU-{index:08d}-1111-2222-3333-444455556666",
        semconv.HW_TYPE: "gpu",
        semconv.HW_NAME: f"nvidia{index}",
        semconv.HW_MODEL: "NVIDIA H100 80GB HBM3",
        semconv.HW_VENDOR: "NVIDIA",
        semconv.GPU_INDEX: str(index),
        semconv.HOST_NAME: "node-1",
        **extra,
    }


def gpu_metrics(time: int = T0) -> tuple[Metric, ...]:
    """A gauge, a monotonic sum with int values, a non-monotonic sum, datapoint attributes."""
    return (
        Metric(
            name="hw.gpu.utilization",
            unit="1",
            description="Fraction of time the GPU was busy",
            kind=MetricKind.GAUGE,
            points=(
                NumberDataPoint(
                    attributes={"hw.gpu.task": "general"}, time_unix_nano=time, value=0.75
                ),
                NumberDataPoint(
                    attributes={"hw.gpu.task": "encoder"}, time_unix_nano=time, value=0.0
                ),
            ),
        ),
        Metric(
            name="hw.energy",
            unit="J",
            description="Energy consumed since the driver loaded",
            kind=MetricKind.SUM,
            monotonic=True,
            points=(
                NumberDataPoint(
                    attributes={}, time_unix_nano=time, start_time_unix_nano=START, value=123456789
                ),
            ),
        ),
        Metric(
            name="hw.gpu.memory.usage",
            unit="By",
            description="GPU memory in use",
            kind=MetricKind.SUM,
            monotonic=False,
            points=(
                NumberDataPoint(
                    attributes={"hw.gpu.memory.state": "used", "nvidia.mig": False},
                    time_unix_nano=time,
                    start_time_unix_nano=START,
                    value=42 * 2**30,
                ),
            ),
        ),
    )


class Recording:
    """A transport that keeps every request it is handed, parsed, and accepts it."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []

    async def open(self) -> None:
        pass

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        self.requests.append(ExportMetricsServiceRequest.FromString(request))
        return ExportResponse()

    async def close(self) -> None:
        pass


def gauge(name: str, time: int, *points: tuple[dict[str, Any], float]) -> Metric:
    """A gauge with one point per (attributes, value)."""
    return Metric(
        name=name,
        unit="1",
        description="",
        kind=MetricKind.GAUGE,
        points=tuple(
            NumberDataPoint(attributes=attributes, time_unix_nano=time, value=value)
            for attributes, value in points
        ),
    )


def holders(time: int, *pods: str) -> Batch:
    """A shared GPU's allocation series, one resource per holder (one identity)."""
    gpu = gpu_resource(0)[semconv.HW_ID]
    share = 1.0 / len(pods) if pods else 0.0
    return tuple(
        ResourceMetrics(
            resource={**gpu_resource(0), semconv.K8S_POD_NAME: name},
            metrics=(
                gauge(
                    semconv.GPU_ALLOCATION,
                    time,
                    ({semconv.HW_ID: gpu, semconv.K8S_POD_NAME: name}, share),
                ),
            ),
            identity=(semconv.GPU_ALLOCATION, gpu),
        )
        for name in pods
    )


def numbered_batch(seq: int, points: int) -> Batch:
    """One resource tagged `test.seq=<seq>` holding `points` gauge points (easy to count)."""
    metric = Metric(
        name="test.value",
        unit="1",
        description="",
        kind=MetricKind.GAUGE,
        points=tuple(
            NumberDataPoint(attributes={"i": i}, time_unix_nano=T0, value=float(i))
            for i in range(points)
        ),
    )
    return (ResourceMetrics(resource={"test.seq": seq}, metrics=(metric,)),)


def numbered_request(seq: int, points: int) -> bytes:
    """The encoded request of `numbered_batch(seq, points)`, as the sending queue holds it."""
    return encode_bytes(numbered_batch(seq, points))


def queued_item(seq: int, points: int = 1) -> Item:
    """A sending-queue item: the request of `numbered_batch(seq, points)` and its point count."""
    return Item(numbered_request(seq, points), points)


async def idle_consumer(queue: BatchQueue) -> asyncio.Task[Item | None]:
    """A consumer task already waiting inside `queue.take()` (one turn of the loop has run)."""
    task = asyncio.create_task(queue.take())
    await asyncio.sleep(0)
    return task


async def export_once(transport: Transport) -> ExportResponse:
    """Opens `transport`, exports one small batch and closes it: the answer, or what it raised."""
    await transport.open()
    try:
        return await transport.export(numbered_request(0, 2), timeout=5)
    finally:
        await transport.close()


def counter(telemetry: SelfTelemetry, name: str, exporter: str) -> float:
    """The current value of a self-telemetry series for one exporter (0 if never set)."""
    for metric in telemetry.collect().metrics:
        if metric.name == name:
            for point in metric.points:
                if point.attributes.get("exporter") == exporter:
                    return point.value
    return 0


def sent(telemetry: SelfTelemetry, exporter: str) -> float:
    return counter(telemetry, "otelgpu_exporter_sent_points_total", exporter)


def failed(telemetry: SelfTelemetry, exporter: str) -> float:
    return counter(telemetry, "otelgpu_exporter_failed_points_total", exporter)


def queue_size(telemetry: SelfTelemetry, exporter: str) -> float:
    return counter(telemetry, "otelgpu_exporter_queue_size", exporter)
