"""Shutdown cut short by the agent's stop deadline still counts and logs every unsent point (R9).

The defect: when the service's shutdown was cancelled at the deadline, the exporter's drain
wait raised CancelledError and nothing that was queued or in flight was ever counted.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.exporter import ExportResponse
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import failed, numbered_batch, queue_size, sent
from tests.unit.exporters.otlp.test_otlp_exporter import ID, ScriptedTransport, make


async def test_a_cancelled_drain_counts_in_flight_and_queued_points_and_logs_them(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ScriptedTransport(then=asyncio.Event())  # the endpoint never answers
    exporter = make(
        telemetry,
        clock,
        transport,
        timeout="60s",
        sending_queue={"drain_timeout": "60s", "num_consumers": 2},
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


class _SlowToCancel:
    """An endpoint that never answers, and whose request takes until `unwound` is set to
    give up once cancelled."""

    def __init__(self) -> None:
        self.unwound = asyncio.Event()
        self.closed = False

    async def open(self) -> None:
        pass

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await self.unwound.wait()
            raise
        return ExportResponse()

    async def close(self) -> None:
        self.closed = True


async def test_a_cut_short_shutdown_does_not_wait_for_a_request_slow_to_unwind(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    transport = _SlowToCancel()
    exporter = make(telemetry, clock, transport, sending_queue={"drain_timeout": "60s"})
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(numbered_batch(0, 3))
    await clock.advance(0)  # in flight, hanging
    stopping = asyncio.create_task(exporter.shutdown())
    await clock.advance(0)
    stopping.cancel()  # the agent's stop deadline
    try:
        await clock.advance(0)
        # Returned with the request still unwinding: counted, and the connection closed.
        assert stopping.done() and transport.closed
        assert failed(telemetry, ID) == 3
    finally:
        transport.unwound.set()
        await clock.advance(0)
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (0, 3)


async def test_a_batch_handed_to_a_consumer_that_never_ran_is_counted_once(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Between the queue's hand-over and the consumer resuming, a batch is in neither list."""
    transport = ScriptedTransport(then=asyncio.Event())
    exporter = make(telemetry, clock, transport, sending_queue={"drain_timeout": "60s"})
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(numbered_batch(0, 7))  # handed to the idle consumer, not yet run
    stopping = asyncio.create_task(exporter.shutdown())
    await asyncio.sleep(0)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    await clock.advance(0)
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (0, 7)
