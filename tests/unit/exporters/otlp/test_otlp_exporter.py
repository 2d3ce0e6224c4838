"""The exporter core: queueing, retries, exact accounting and shutdown, over a scripted peer."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otelgpu.component.component import Kind
from otelgpu.component.errors import ExportError
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.confighttp.compression import gzip_bytes
from otelgpu.exporterhelper.config import RetryConfig
from otelgpu.exporterhelper.retry import Backoff
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes
from otelgpu.exporters.otlp.ended import EndedSeries, Receipt
from otelgpu.exporters.otlp.exporter import ExportResponse, OtlpExporter, Transport
from otelgpu.exporters.otlp.resource import service_attributes
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import failed, numbered_batch, queue_size, sent

ID = "otlp"
RETRYABLE = ExportError("gRPC UNAVAILABLE: down", retryable=True)
PERMANENT = ExportError("gRPC INVALID_ARGUMENT: bad", retryable=False)


class ScriptedTransport:
    """Answers each export with the next scripted outcome (then success); records requests.

    An outcome may be an ExportResponse, an exception to raise, or an Event to wait on
    (a request that hangs until the test releases it).
    """

    def __init__(self, *outcomes: Any, then: Any = None) -> None:
        self.outcomes = list(outcomes)
        self.then = then if then is not None else ExportResponse()
        self.requests: list[ExportMetricsServiceRequest] = []
        self.raw: list[object] = []  # what `export` was handed, as it was handed
        self.opened = self.closed = False

    async def open(self) -> None:
        self.opened = True

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        self.raw.append(request)
        self.requests.append(ExportMetricsServiceRequest.FromString(request))
        outcome = self.outcomes.pop(0) if self.outcomes else self.then
        if isinstance(outcome, asyncio.Event):
            await outcome.wait()
            return ExportResponse()
        if isinstance(outcome, BaseException):
            raise outcome
        assert isinstance(outcome, ExportResponse)
        return outcome

    async def close(self) -> None:
        self.closed = True

    def seqs(self) -> list[int]:
        """The `test.seq` of every request, in the order they were sent."""
        return [r.resource_metrics[0].resource.attributes[0].value.int_value for r in self.requests]


def make(
    telemetry: SelfTelemetry,
    clock: FakeClock,
    transport: Transport,
    *,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    rand: Callable[[], float] = random.random,
    **options: Any,
) -> OtlpExporter:
    config = OtlpExporterConfig.model_validate(options)
    settings = make_settings(ID, Kind.EXPORTER, telemetry)
    return OtlpExporter(
        settings,
        config,
        transport,
        sleep=sleep or clock.sleep,
        monotonic=clock.monotonic,
        rand=rand,
    )


def _make_without_jitter(
    telemetry: SelfTelemetry, clock: FakeClock, transport: Any, **options: Any
) -> OtlpExporter:
    return make(telemetry, clock, transport, rand=lambda: 0.5, **options)  # no jitter


@pytest.fixture
async def started(telemetry: SelfTelemetry, clock: FakeClock) -> Any:
    """A factory of started exporters, shut down at the end of the test."""
    exporters: list[OtlpExporter] = []

    async def start(transport: ScriptedTransport, **options: Any) -> OtlpExporter:
        exporter = make(telemetry, clock, transport, **options)
        await exporter.start(FakeHost(telemetry))
        exporters.append(exporter)
        return exporter

    yield start
    for exporter in exporters:
        await exporter.shutdown()


async def test_consume_only_queues_and_the_queue_gauge_follows(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    gate = asyncio.Event()
    transport = ScriptedTransport(gate)
    exporter = await started(transport)
    for seq in range(3):
        await exporter.consume(numbered_batch(seq, 2))
    await clock.advance(0)
    queued = queue_size(telemetry, ID)  # one batch is in flight, blocked, 2 queued
    gate.set()
    await clock.advance(0)
    assert transport.seqs() == [0, 1, 2]
    # In bytes (the default sizer) as held: gzipped while queued, sent as encoded.
    assert queued == len(gzip_bytes(transport.raw[1])) + len(gzip_bytes(transport.raw[2]))
    assert (sent(telemetry, ID), failed(telemetry, ID), queue_size(telemetry, ID)) == (6, 0, 0)


async def test_the_transport_gets_the_encoded_bytes_not_a_parsed_message(
    started: Any, clock: FakeClock
) -> None:
    # A message parsed from the bytes, only for the transport to serialize it again, cost ~4x
    # the request's size in memory (P3) and the CPU of both steps.
    transport = ScriptedTransport()
    exporter = await started(transport)
    await exporter.consume(numbered_batch(4, 3))
    await clock.advance(0)
    service = AttributeCache(resource_defaults=service_attributes(os.environ))  # as in start()
    assert transport.raw == [encode_bytes(numbered_batch(4, 3), service)]
    assert type(transport.raw[0]) is bytes


async def test_a_sent_batch_is_not_kept_alive_while_waiting_for_the_next(
    started: Any, clock: FakeClock
) -> None:
    # The consumer's loop variable held the last batch until the next one came: a whole
    # cycle's batch (5.5 MiB at 10k series) kept for nothing (P3).
    transport = ScriptedTransport()
    exporter = await started(transport)
    resource = numbered_batch(1, 3)[0]
    baseline = sys.getrefcount(resource)  # outside `assert`: pytest's rewrite holds operands
    await exporter.consume((resource,))
    await clock.advance(0)
    assert transport.seqs() == [1]  # sent, and the consumer waits for the next batch
    after = sys.getrefcount(resource)
    assert after == baseline


async def test_a_full_queue_refuses_new_batches_and_counts_their_points(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    gate = asyncio.Event()
    transport = ScriptedTransport(gate)
    exporter = await started(transport, sending_queue={"sizer": "requests", "queue_size": 2})
    with caplog.at_level(logging.WARNING):
        for seq in range(1, 7):  # batch n holds n points
            await exporter.consume(numbered_batch(seq, seq))
    assert failed(telemetry, ID) == 4 + 5 + 6
    assert sum("queue is full" in r.message for r in caplog.records) == 1  # once, not per batch
    gate.set()
    await clock.advance(0)
    assert transport.seqs() == [1, 2, 3]
    assert sent(telemetry, ID) == 1 + 2 + 3


async def test_retryable_failures_back_off_exponentially_then_succeed(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await clock.sleep(seconds)

    # The jitter's random numbers are given: each wait is interval x (0.5 + r) (+-50 %).
    jitter = iter([0.25, 0.75])
    transport = ScriptedTransport(RETRYABLE, RETRYABLE)
    exporter = await started(transport, sleep=sleep, rand=lambda: next(jitter))
    await exporter.consume(numbered_batch(0, 3))
    await clock.advance(0)
    assert (len(transport.requests), waits) == (1, [5 * 0.75])  # initial 5s, r = 0.25
    await clock.advance(3.75)
    assert (len(transport.requests), waits) == (2, [3.75, 7.5 * 1.25])  # then x1.5, r = 0.75
    await clock.advance(9.375)
    assert (len(transport.requests), waits) == (3, [3.75, 9.375])
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (3, 0)


async def test_permanent_errors_are_not_retried(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    transport = ScriptedTransport(PERMANENT)
    exporter = await started(transport)
    await exporter.consume(numbered_batch(0, 4))
    await exporter.consume(numbered_batch(1, 5))
    await clock.advance(600)
    assert transport.seqs() == [0, 1]
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (5, 4)


async def test_retrying_stops_at_max_elapsed_time(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    transport = ScriptedTransport(then=RETRYABLE)
    retry = {"initial_interval": "4s", "max_interval": "4s", "max_elapsed_time": "20s"}
    exporter = await started(transport, retry_on_failure=retry, rand=lambda: 0.5)
    await exporter.consume(numbered_batch(0, 7))
    await clock.advance(100)
    # Waits of exactly 4s (no jitter at r = 0.5): attempts at 0, 4, ... 20s; a wait ending
    # at 20s is still within max_elapsed_time, one ending at 24s is not.
    assert len(transport.requests) == 6
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (0, 7)


async def test_giving_up_after_retries_with_the_same_error_is_logged(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ScriptedTransport(then=RETRYABLE)
    retry = {"initial_interval": "4s", "max_interval": "4s", "max_elapsed_time": "10s"}
    exporter = _make_without_jitter(telemetry, clock, transport, retry_on_failure=retry)
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


async def test_the_server_sent_delay_is_honoured(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    throttled = ExportError("HTTP 429", retryable=True, retry_after=60.0)
    transport = ScriptedTransport(throttled)
    exporter = await started(transport)
    await exporter.consume(numbered_batch(0, 1))
    await clock.advance(59.9)
    assert len(transport.requests) == 1
    await clock.advance(0.2)
    assert len(transport.requests) == 2 and sent(telemetry, ID) == 1


async def test_retry_disabled_drops_on_the_first_failure(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    transport = ScriptedTransport(RETRYABLE)
    exporter = await started(transport, retry_on_failure={"enabled": False})
    await exporter.consume(numbered_batch(0, 2))
    await clock.advance(60)
    assert len(transport.requests) == 1 and failed(telemetry, ID) == 2


async def test_partial_success_counts_rejected_points_as_failed(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    partial = ExportResponse(rejected=2, message="2 points out of range")
    transport = ScriptedTransport(partial, partial)
    exporter = await started(transport)
    with caplog.at_level(logging.WARNING):
        await exporter.consume(numbered_batch(0, 5))
        await exporter.consume(numbered_batch(1, 5))
        await clock.advance(0)
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (6, 4)
    assert sum("out of range" in r.message for r in caplog.records) == 1


async def test_an_unexpected_transport_error_costs_one_batch_not_the_consumer(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ScriptedTransport(RuntimeError("bug"))
    exporter = await started(transport)
    with caplog.at_level(logging.ERROR):
        await exporter.consume(numbered_batch(0, 2))
        await exporter.consume(numbered_batch(1, 3))
        await clock.advance(0)
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (3, 2)
    # the bug is logged with its traceback, for someone to report
    (logged,) = [r for r in caplog.records if r.getMessage() == "export failed unexpectedly"]
    assert logged.exc_info is not None and "bug" in str(logged.exc_info[1])


class _SettleFails(EndedSeries):
    """A memory whose settling of a request's closing points raises (a bug in it)."""

    def accepted(self, receipt: Receipt | None) -> None:
        raise RuntimeError("settle bug")

    def refused(self, receipt: Receipt | None) -> None:
        raise RuntimeError("settle bug")


async def test_a_failure_settling_a_sent_batch_is_logged_and_the_consumer_goes_on(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    # What a consumer does once a batch is sent (count it, settle its closing points) must
    # not end the consumer: the next batches are still sent, and every point is counted.
    transport = ScriptedTransport(PERMANENT)
    exporter = await started(transport, retry_on_failure={"enabled": False})
    exporter._ended = _SettleFails()
    with caplog.at_level(logging.ERROR):
        for seq in range(3):
            await exporter.consume(numbered_batch(seq, seq + 1))
            await clock.advance(0)
    assert transport.seqs() == [0, 1, 2]
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (5, 1)
    settle_lines = [r for r in caplog.records if "settle bug" in str(r.exc_info)]
    assert len(settle_lines) == 3


async def test_shutdown_flushes_the_queue(telemetry: SelfTelemetry, clock: FakeClock) -> None:
    transport = ScriptedTransport()
    exporter = make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    for seq in range(5):
        await exporter.consume(numbered_batch(seq, seq + 1))
    await exporter.shutdown()
    assert transport.seqs() == [0, 1, 2, 3, 4] and transport.closed
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (15, 0)


async def test_shutdown_interrupts_the_retry_wait_and_counts_everything_unsent(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    transport = ScriptedTransport(then=RETRYABLE)
    exporter = make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    for seq in range(4):
        await exporter.consume(numbered_batch(seq, seq + 1))
    await clock.advance(0)  # the first batch failed and waits on the (fake) clock
    await exporter.shutdown()  # returns without the clock moving: the wait was interrupted
    assert len(transport.requests) == 2  # one last attempt; the endpoint is down: no more
    assert (sent(telemetry, ID), failed(telemetry, ID), queue_size(telemetry, ID)) == (0, 10, 0)


async def test_shutdown_retries_a_waiting_batch_at_once_and_drains_if_the_endpoint_is_back(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    transport = ScriptedTransport(RETRYABLE)
    exporter = make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    for seq in range(3):
        await exporter.consume(numbered_batch(seq, seq + 1))
    await clock.advance(0)
    await exporter.shutdown()
    assert transport.seqs() == [0, 0, 1, 2]
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (6, 0)


async def test_shutdown_gives_up_at_the_drain_deadline(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    transport = ScriptedTransport(then=asyncio.Event())  # every request hangs
    exporter = make(telemetry, clock, transport, sending_queue={"drain_timeout": "50ms"})
    await exporter.start(FakeHost(telemetry))
    for seq in range(3):
        await exporter.consume(numbered_batch(seq, 2))
    await exporter.shutdown()
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (0, 6)  # in flight + queued


def _shutdown_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("shutdown:")]


async def test_a_batch_dropped_before_shutdown_is_not_in_the_shutdown_total(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ScriptedTransport(PERMANENT)
    exporter = _make_without_jitter(telemetry, clock, transport)
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
    exporter = _make_without_jitter(telemetry, clock, transport)
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


async def test_without_a_queue_a_busy_exporter_drops_and_counts(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    gate = asyncio.Event()
    transport = ScriptedTransport(gate)
    exporter = await started(transport, sending_queue={"enabled": False})
    await exporter.consume(numbered_batch(0, 1))  # an idle consumer takes it at once
    await exporter.consume(numbered_batch(1, 2))  # nobody idle, nowhere to wait
    gate.set()
    await clock.advance(0)
    await exporter.consume(numbered_batch(2, 4))
    await clock.advance(0)
    assert transport.seqs() == [0, 2]
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (5, 2)


async def test_lifecycle_edges(telemetry: SelfTelemetry, clock: FakeClock) -> None:
    transport = ScriptedTransport()
    never_started = make(telemetry, clock, transport)
    await never_started.shutdown()
    await never_started.shutdown()
    exporter = make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(())  # nothing to send, nothing to count
    await exporter.shutdown()
    await exporter.consume(numbered_batch(0, 3))  # too late: counted, never queued
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (0, 3)
    assert transport.opened and transport.closed and transport.requests == []


async def test_shutdown_leaves_no_consumer_running(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    gate = asyncio.Event()
    exporter = _make_without_jitter(
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


@pytest.mark.parametrize(
    ("rand", "expected"),
    [
        (lambda: 0.5, [5.0, 7.5, 11.25, 16.875, 25.3125, 30.0, 30.0]),
        (lambda: 0.0, [2.5, 3.75, 5.625, 8.4375, 12.65625, 15.0, 15.0]),
        (lambda: 1.0, [7.5, 11.25, 16.875, 25.3125, 37.96875, 45.0, 45.0]),
    ],
)
def test_backoff_schedule(rand: Any, expected: list[float]) -> None:
    backoff = Backoff(RetryConfig(max_elapsed_time="0s"), started=0.0, rand=rand)
    assert [backoff.next_delay(RETRYABLE, now=0.0) for _ in expected] == expected


def test_backoff_gives_up() -> None:
    backoff = Backoff(RetryConfig(), started=0.0, rand=lambda: 0.5)
    assert backoff.next_delay(PERMANENT, now=0.0) is None
    assert backoff.next_delay(RETRYABLE, now=294.0) == 5.0
    assert backoff.next_delay(RETRYABLE, now=294.0) is None  # 294 + 7.5 > 300
    throttled = ExportError("x", retryable=True, retry_after=90.0)
    assert Backoff(RetryConfig(), 0.0, rand=lambda: 0.5).next_delay(throttled, 0.0) == 90.0


async def test_failures_are_logged_once_per_change_not_per_batch(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ScriptedTransport(*[PERMANENT] * 5, RETRYABLE)
    exporter = await started(transport)
    with caplog.at_level(logging.INFO):
        for seq in range(6):
            await exporter.consume(numbered_batch(seq, 1))
        await clock.advance(60)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("dropping" in m for m in messages) == 1
    assert sum("retrying" in m for m in messages) == 1
    assert sum("succeeded again" in m for m in messages) == 1
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (1, 5)


async def test_a_drop_after_a_success_is_logged_even_with_no_message(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A success ends the dropping streak: the next batch given up is logged again, also when
    the endpoint's error says nothing."""
    silent = ExportError("", retryable=False)
    transport = ScriptedTransport(silent, ExportResponse(), silent)
    exporter = _make_without_jitter(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        for seq in range(3):
            await exporter.consume(numbered_batch(seq, 2))
            await clock.advance(0)
    await exporter.shutdown()
    dropped = [r.getMessage() for r in caplog.records if "dropping" in r.getMessage()]
    assert dropped == ["export failed, dropping 2 points: ", "export failed, dropping 2 points: "]


async def test_a_permanent_error_while_draining_costs_only_its_own_batch(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    gate = asyncio.Event()
    transport = ScriptedTransport(gate, PERMANENT)
    exporter = make(telemetry, clock, transport)
    await exporter.start(FakeHost(telemetry))
    for seq in range(3):
        await exporter.consume(numbered_batch(seq, seq + 1))
    stopping = asyncio.create_task(exporter.shutdown())
    await clock.advance(0)
    gate.set()  # the in-flight request completes while draining
    await stopping
    assert transport.seqs() == [0, 1, 2]
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (1 + 3, 2)
