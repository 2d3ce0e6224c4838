"""The otlp and otlp_http exporters against the real rotel receiver (PEERS.md).

What rotel prints is what arrived: values, units, types, attributes, over gRPC and HTTP,
with and without gzip. Then an outage: rotel stopped while batches keep coming and started
again on the same ports; the queue's content must arrive and exactly the overflow be counted.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.registry import Factory
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp import factory, http_factory
from otelgpu.exporters.otlp.exporter import OtlpExporter
from otelgpu.exporters.otlp.resource import service_attributes
from otelgpu.pdata.model import ResourceMetrics, point_count
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.peers.rotel import ResourceOut, Rotel, rotel
from tests.unit.exporters.otlp.batches import (
    INTERVAL,
    START,
    T0,
    failed,
    gpu_metrics,
    gpu_resource,
    holders,
    numbered_batch,
    sent,
)

pytestmark = pytest.mark.integration

FAST_RETRY = {"initial_interval": "50ms", "max_interval": "200ms", "max_elapsed_time": "0s"}
TRANSPORTS = ["grpc", "http"]


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Rotel]:
    with rotel(tmp_path / "rotel") as peer:
        yield peer


def _exporter(
    transport: str,
    peer: Rotel,
    telemetry: SelfTelemetry,
    listeners: KeptListeners | None = None,
    **options: Any,
) -> tuple[OtlpExporter, str]:
    chosen: Factory = factory if transport == "grpc" else http_factory
    base: dict[str, Any] = (
        {"endpoint": peer.grpc_endpoint, "tls": {"insecure": True}}
        if transport == "grpc"
        else {"endpoint": peer.http_endpoint}
    )
    config = chosen.config_type.model_validate({**base, **options})
    settings = make_settings(chosen.type, Kind.EXPORTER, telemetry)
    if listeners is not None:  # as the agent's services are built: a reload hands over
        settings = replace(settings, listeners=listeners)
    exporter = chosen.create(settings, config)
    assert isinstance(exporter, OtlpExporter)
    return exporter, chosen.type


def _seqs(resources: list[ResourceOut]) -> list[object]:
    return [r.attributes.get("test.seq") for r in resources]


@pytest.mark.parametrize("compression", ["gzip", "none"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_what_rotel_receives_is_what_was_sent(
    receiver: Rotel, telemetry: SelfTelemetry, transport: str, compression: str
) -> None:
    exporter, id_ = _exporter(transport, receiver, telemetry, compression=compression)
    resource = gpu_resource(1, **{"k8s.pod.name": "trainer-0", "nvidia.gpu.holders": 2})
    batch = (ResourceMetrics(resource=resource, metrics=gpu_metrics(), scope_version="1.2.3"),)
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(batch)
    (got,) = await receiver.wait_for(lambda rs: len(rs) >= 1)
    await exporter.shutdown()

    # Types too ("nvidia.gpu.holders" is Int(2)); the exporter adds the agent's service.*.
    assert got.attributes == {**resource, **service_attributes(os.environ)}
    assert (got.scope_name, got.scope_version) == ("otelgpu", "1.2.3")
    util, energy, memory = got.metrics
    assert (util.name, util.unit, util.data_type) == ("hw.gpu.utilization", "1", "Gauge")
    assert util.description == "Fraction of time the GPU was busy"
    assert [(p.attributes, p.value, p.time_unix_nano) for p in util.points] == [
        ({"hw.gpu.task": "general"}, 0.75, T0),
        ({"hw.gpu.task": "encoder"}, 0.0, T0),
    ]
    assert (energy.name, energy.unit, energy.data_type, energy.monotonic) == (
        "hw.energy",
        "J",
        "Sum",
        True,
    )
    assert energy.temporality == "AGGREGATION_TEMPORALITY_CUMULATIVE"
    (e,) = energy.points
    assert (e.raw_value, e.start_time_unix_nano, e.time_unix_nano) == ("123456789", START, T0)
    assert (memory.data_type, memory.monotonic, memory.unit) == ("Sum", False, "By")
    (m,) = memory.points
    assert m.attributes == {"hw.gpu.memory.state": "used", "nvidia.mig": False}
    assert m.raw_value == str(42 * 2**30)
    assert (sent(telemetry, id_), failed(telemetry, id_)) == (point_count(batch), 0)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_outage_loses_nothing_the_queue_holds_and_counts_the_rest(
    receiver: Rotel, telemetry: SelfTelemetry, transport: str
) -> None:
    queue_size = 3
    exporter, id_ = _exporter(
        transport,
        receiver,
        telemetry,
        retry_on_failure=FAST_RETRY,
        sending_queue={"sizer": "requests", "queue_size": queue_size},
        timeout="1s",
    )
    points = {seq: seq + 1 for seq in range(10)}  # batch `seq` holds seq + 1 points
    await exporter.start(FakeHost(telemetry))
    try:
        await exporter.consume(numbered_batch(0, points[0]))
        await receiver.wait_for(lambda rs: _seqs(rs) == [0])
        async with asyncio.timeout(10):  # the answer reached the exporter: its consumer is idle
            while sent(telemetry, id_) < points[0]:
                await asyncio.sleep(0.01)
        receiver.stop()
        # Batch 1 goes to the idle consumer, which retries it while the receiver is down;
        # 2..4 fill the queue; 5..9 find it full and are dropped.
        for seq in range(1, 10):
            await exporter.consume(numbered_batch(seq, points[seq]))
        dropped = sum(points[s] for s in range(2 + queue_size, 10))
        assert failed(telemetry, id_) == dropped
        await receiver.restart()
        got = await receiver.wait_for(lambda rs: len(rs) >= 5)
    finally:
        await exporter.shutdown()
    assert sorted(_seqs(got)) == [0, 1, 2, 3, 4]  # each exactly once
    delivered = sum(points[s] for s in range(5))
    assert (sent(telemetry, id_), failed(telemetry, id_)) == (delivered, dropped)
    assert delivered + dropped == sum(points.values())


async def test_shutdown_flushes_the_queue(receiver: Rotel, telemetry: SelfTelemetry) -> None:
    exporter, id_ = _exporter("grpc", receiver, telemetry)
    await exporter.start(FakeHost(telemetry))
    for seq in range(6):
        await exporter.consume(numbered_batch(seq, 2))
    await exporter.shutdown()
    assert (sent(telemetry, id_), failed(telemetry, id_)) == (12, 0)
    got = await receiver.wait_for(lambda rs: len(rs) >= 6)
    assert sorted(_seqs(got)) == list(range(6))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_shutdown_with_the_receiver_down_counts_every_point(
    receiver: Rotel, telemetry: SelfTelemetry, transport: str
) -> None:
    exporter, id_ = _exporter(transport, receiver, telemetry, retry_on_failure=FAST_RETRY)
    await exporter.start(FakeHost(telemetry))
    receiver.stop()
    for seq in range(5):
        await exporter.consume(numbered_batch(seq, seq + 1))
    await exporter.shutdown()  # well within drain_timeout: the endpoint is seen down
    assert (sent(telemetry, id_), failed(telemetry, id_)) == (0, 15)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_holder_that_left_is_closed_and_the_receiver_takes_it(
    receiver: Rotel, telemetry: SelfTelemetry, transport: str
) -> None:
    """The closing point (flagged "no recorded value", NaN) is accepted by a real receiver
    beside the live series, and counts as nothing sent (it is not a reading)."""
    exporter, id_ = _exporter(transport, receiver, telemetry)
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(holders(T0, "a", "b"))
    await receiver.wait_for(lambda rs: len(rs) >= 2)
    await exporter.consume(holders(T0 + INTERVAL, "a"))
    got = await receiver.wait_for(lambda rs: len(rs) >= 4)
    await exporter.shutdown()
    second = {
        (r.attributes["k8s.pod.name"], p.time_unix_nano, p.raw_value)
        for r in got[2:]
        for m in r.metrics
        for p in m.points
    }
    assert second == {("a", T0 + INTERVAL, "1"), ("b", T0 + INTERVAL, "NaN")}
    assert (sent(telemetry, id_), failed(telemetry, id_)) == (3, 0)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_holder_that_left_across_a_reload_is_closed_by_the_new_exporter(
    receiver: Rotel, telemetry: SelfTelemetry, transport: str
) -> None:
    """The old service's exporter sent holders a and b; the new one's first request (a alone)
    closes b: the memory of what was sent went through the reload."""
    kept = KeptListeners()
    old, _ = _exporter(transport, receiver, telemetry, listeners=kept)
    await old.start(FakeHost(telemetry))
    await old.consume(holders(T0, "a", "b"))
    await receiver.wait_for(lambda rs: len(rs) >= 2)
    await old.shutdown()
    new, _ = _exporter(transport, receiver, telemetry, listeners=kept)
    await new.start(FakeHost(telemetry))
    await new.consume(holders(T0 + INTERVAL, "a"))
    got = await receiver.wait_for(lambda rs: len(rs) >= 4)
    await new.shutdown()
    second = {
        (r.attributes["k8s.pod.name"], p.time_unix_nano, p.raw_value)
        for r in got[2:]
        for m in r.metrics
        for p in m.points
    }
    assert second == {("a", T0 + INTERVAL, "1"), ("b", T0 + INTERVAL, "NaN")}
