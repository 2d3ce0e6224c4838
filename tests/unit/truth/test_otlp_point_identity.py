"""Every OTLP point of the labelling pipeline is told apart by its point attributes alone (what
Prometheus' OTLP endpoint keeps by default, besides job and instance): the allocation series
of a time-sliced GPU are one series per holder, not one per node."""

from __future__ import annotations

from collections import Counter
from typing import Any

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.encode import encode
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    UUID_B,
    FakePodResources,
    allocatable,
    container,
    gpu,
    make_processor,
    pod,
)


def _attrs(kvs: Any) -> tuple[tuple[str, object], ...]:
    return tuple(sorted((kv.key, getattr(kv.value, kv.value.WhichOneof("value"))) for kv in kvs))


async def test_allocation_points_name_their_device_and_holder() -> None:
    telemetry, clock, client = SelfTelemetry(), FakeClock(), FakePodResources()
    client.devices = allocatable({GPU: [UUID_A, UUID_B]})
    client.set(
        pod("ml", "a", container("c", {GPU: [f"{UUID_A}::0"]})),
        pod("ml", "b", container("c", {GPU: [f"{UUID_A}::1"]})),
        pod("ml", "d", container("c", {GPU: [UUID_B]})),
    )
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    try:
        out = processor.process((gpu(UUID_A, 0), gpu(UUID_B, 1)))
    finally:
        await processor.shutdown()
    request = encode(out)
    seen: Counter[tuple[str, tuple[tuple[str, object], ...]]] = Counter()
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.gauge.data_points or metric.sum.data_points:
                    seen[(metric.name, _attrs(point.attributes))] += 1
    # (The GPU points here are the test's own; the receiver's carry hw.id, see nvml/reading.py.)
    allocation = {key: n for key, n in seen.items() if key[0] == "nvidia.gpu.allocation"}
    assert list(allocation.values()) == [1, 1, 1]  # two holders of GPU A, one of GPU B
