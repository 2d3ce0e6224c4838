"""The exporter core case by case: the line logged when the first batch is given up (and again
after a success), what the shutdown's "could not be sent" total holds, a stop deadline that
does not wait on a request slow to unwind, and no consumer left running after shutdown."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from otelgpu.component.errors import ExportError
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.exporter import ExportResponse, OtlpExporter
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import failed, numbered_batch, sent
from tests.unit.exporters.otlp.test_otlp_exporter import (
    ID,
    PERMANENT,
    RETRYABLE,
    ScriptedTransport,
    make,
)


def _make(
    telemetry: SelfTelemetry, clock: FakeClock, transport: Any, **options: Any
) -> OtlpExporter:
    return make(telemetry, clock, transport, rand=lambda: 0.5, **options)  # no jitter


def _shutdown_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("shutdown:")]


async def test_giving_up_after_retries_with_the_same_error_is_logged(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ScriptedTransport(then=RETRYABLE)
    retry = {"initial_interval": "4s", "max_interval": "4s", "max_elapsed_time": "10s"}
    exporter = _make(telemetry, clock, transport, retry_on_failure=retry)
    await exporter.start(FakeHost(telemetry))
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        await exporter.consume(numbered_batch(0, 7))
        await clock.advance(100)
    await exporter.shutdown()
    # The retry line once (the error does not change), then the batch given up.
    assert [r.getMessage() for r in caplog.records] == [
        "export failed, retrying in 4s: gRPC UNAVAILABLE: down",
        "export failed, dropping 7 points: gRPC UNAVAILABLE: down",
    ]
    assert failed(telemetry, ID) == 7


async def test_a_batch_dropped_before_shutdown_is_not_in_the_shutdown_total(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ScriptedTransport(PERMANENT)
    exporter = _make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        await exporter.consume(numbered_batch(0, 4))
        await clock.advance(0)
        await exporter.consume(numbered_batch(1, 5))
        await exporter.shutdown()  # the second batch is sent while draining
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (5, 4)
    assert _shutdown_lines(caplog) == []


async def test_a_batch_dropped_while_draining_is_in_the_shutdown_total(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    gate = asyncio.Event()
    transport = ScriptedTransport(gate, PERMANENT)
    exporter = _make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    for seq in range(3):
        await exporter.consume(numbered_batch(seq, seq + 1))
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        stopping = asyncio.create_task(exporter.shutdown())
        await clock.advance(0)
        gate.set()  # the first request completes; the second is rejected while draining
        await stopping
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (1 + 3, 2)
    assert _shutdown_lines(caplog) == ["shutdown: 2 points could not be sent (counted as failed)"]


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
    exporter = _make(telemetry, clock, transport, sending_queue={"drain_timeout": "60s"})
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


async def test_a_drop_after_a_success_is_logged_even_with_no_message(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A success ends the dropping streak: the next batch given up is logged again, also when
    the endpoint's error says nothing."""
    silent = ExportError("", retryable=False)
    transport = ScriptedTransport(silent, ExportResponse(), silent)
    exporter = _make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        for seq in range(3):
            await exporter.consume(numbered_batch(seq, 2))
            await clock.advance(0)
    await exporter.shutdown()
    dropped = [r.getMessage() for r in caplog.records if "dropping" in r.getMessage()]
    assert dropped == ["export failed, dropping 2 points: ", "export failed, dropping 2 points: "]


async def test_shutdown_leaves_no_consumer_running(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    gate = asyncio.Event()
    exporter = _make(
        telemetry,
        clock,
        ScriptedTransport(gate),
        sending_queue={"num_consumers": 3, "drain_timeout": "10ms"},
    )
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(numbered_batch(0, 1))  # one consumer blocked in a request
    await clock.advance(0)
    await exporter.shutdown()
    consumers = [t for t in asyncio.all_tasks() if t.get_name().startswith(f"{ID} consumer")]
    assert consumers == []
