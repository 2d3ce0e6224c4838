"""Shutdown cut short by the agent's stop deadline still counts and logs every unsent point (R9).

The defect: when the service's shutdown was cancelled at the deadline, the exporter's drain
wait raised CancelledError and nothing that was queued or in flight was ever counted.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.exporter import OtlpExporter
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import failed, numbered_batch, queue_size, sent
from tests.unit.exporters.otlp.test_otlp_exporter import ScriptedTransport

ID = "otlp"


async def test_a_cancelled_drain_counts_in_flight_and_queued_points_and_logs_them(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ScriptedTransport(then=asyncio.Event())  # the endpoint never answers
    config = OtlpExporterConfig.model_validate(
        {"timeout": "60s", "sending_queue": {"drain_timeout": "60s", "num_consumers": 2}}
    )
    exporter = OtlpExporter(
        make_settings(ID, Kind.EXPORTER, telemetry),
        config,
        transport,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    await exporter.start(FakeHost(telemetry))
    for seq in range(5):
        await exporter.consume(numbered_batch(seq, seq + 1))
    await clock.advance(0)  # two batches in flight (hanging), three queued
    stopping = asyncio.create_task(exporter.shutdown())
    await clock.advance(0)
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        stopping.cancel()  # the agent's stop deadline
        with pytest.raises(asyncio.CancelledError):
            await stopping
    assert (sent(telemetry, ID), failed(telemetry, ID), queue_size(telemetry, ID)) == (0, 15, 0)
    assert [r.getMessage() for r in caplog.records] == [
        "shutdown: 15 points could not be sent (counted as failed)"
    ]
    await clock.advance(0)  # the cancelled consumers finish without counting anything twice
    assert failed(telemetry, ID) == 15
    await exporter.shutdown()  # idempotent
    assert failed(telemetry, ID) == 15


async def test_a_batch_handed_to_a_consumer_that_never_ran_is_counted_once(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Between the queue's hand-over and the consumer resuming, a batch is in neither list."""
    transport = ScriptedTransport(then=asyncio.Event())
    config = OtlpExporterConfig.model_validate({"sending_queue": {"drain_timeout": "60s"}})
    exporter = OtlpExporter(
        make_settings(ID, Kind.EXPORTER, telemetry),
        config,
        transport,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(numbered_batch(0, 7))  # handed to the idle consumer, not yet run
    stopping = asyncio.create_task(exporter.shutdown())
    await asyncio.sleep(0)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    await clock.advance(0)
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (0, 7)
