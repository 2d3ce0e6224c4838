"""A closing point is owed until a request carrying it is accepted: a request the queue refuses
or the retries give up leaves its closing points to the next request, and a reload hands the
memory of what was sent (and what is still owed) to the new exporter, which closes what the
new configuration no longer sends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otelgpu.component.component import Kind, Settings
from otelgpu.component.errors import ExportError
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.exporters.otlp.exporter import ExportResponse, OtlpExporter
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import INTERVAL, T0, gpu_resource, holders
from tests.unit.exporters.otlp.batches import gauge as _gauge
from tests.unit.exporters.otlp.test_otlp_ended import points

GPU = gpu_resource(0)[semconv.HW_ID]
ALLOC = semconv.GPU_ALLOCATION
A = {semconv.HW_ID: GPU, semconv.K8S_POD_NAME: "a"}
B = {semconv.HW_ID: GPU, semconv.K8S_POD_NAME: "b"}


class Scripted:
    """A transport that answers each request as told (an ExportError to raise, or None to
    accept), accepting once the script runs out; `gate`, when set, holds each request until
    it is set (a consumer kept busy)."""

    def __init__(self, *script: ExportError | None) -> None:
        self.script = list(script)
        self.tried: list[ExportMetricsServiceRequest] = []
        self.accepted: list[ExportMetricsServiceRequest] = []
        self.gate: asyncio.Event | None = None
        self.arrived = asyncio.Event()

    async def open(self) -> None:
        pass

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        parsed = ExportMetricsServiceRequest.FromString(request)
        self.tried.append(parsed)
        self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        answer = self.script.pop(0) if self.script else None
        if answer is not None:
            raise answer
        self.accepted.append(parsed)
        return ExportResponse()

    async def close(self) -> None:
        pass


def _closed(request: ExportMetricsServiceRequest) -> list[tuple[str, dict[str, Any]]]:
    return [p[:2] for p in points(request) if str(p[2]).startswith("closed")]


def _exporter(
    transport: Scripted,
    clock: FakeClock,
    config: dict[str, Any] | None = None,
    *,
    settings: Settings | None = None,
    wall: Callable[[], int] | None = None,
) -> OtlpExporter:
    telemetry = SelfTelemetry()
    return OtlpExporter(
        settings or make_settings("otlp", Kind.EXPORTER, telemetry),
        OtlpExporterConfig.model_validate({"endpoint": "localhost:4317", **(config or {})}),
        transport,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
        **({"wall": wall} if wall is not None else {}),
    )


async def _send(exporter: OtlpExporter, clock: FakeClock, *batches: Batch) -> None:
    for batch in batches:
        await exporter.consume(batch)
        await clock.advance(0)


async def test_the_closing_points_of_a_request_given_up_go_with_the_next_accepted_one() -> None:
    clock = FakeClock()
    transport = Scripted(None, ExportError("bad gateway", retryable=False))
    now = [T0]
    exporter = _exporter(transport, clock, wall=lambda: now[0])
    await exporter.start(FakeHost(SelfTelemetry()))
    try:
        await _send(exporter, clock, holders(T0, "a", "b"), holders(T0 + INTERVAL, "a"))
        assert _closed(transport.tried[1]) == [(ALLOC, B)]  # tried, and given up
        now[0] = T0 + 2 * INTERVAL + 5
        await _send(exporter, clock, holders(T0 + 2 * INTERVAL, "a"))
        await _send(exporter, clock, holders(T0 + 3 * INTERVAL, "a"))
    finally:
        await exporter.shutdown()
    assert [_closed(r) for r in transport.accepted] == [[], [(ALLOC, B)], []]
    (closing,) = [p for p in points(transport.accepted[1]) if p[1] == B]
    assert closing[2] == f"closed at {T0 + 2 * INTERVAL + 5}"  # when it is sent again


async def test_the_closing_points_of_a_batch_the_queue_refused_go_with_the_next_one() -> None:
    clock = FakeClock()
    transport = Scripted()
    transport.gate = asyncio.Event()
    # No queue: a batch is taken only by an idle consumer, and the only one is busy.
    exporter = _exporter(
        transport, clock, {"sending_queue": {"enabled": False, "num_consumers": 1}}
    )
    await exporter.start(FakeHost(SelfTelemetry()))
    try:
        await _send(exporter, clock, holders(T0, "a", "b"))
        await transport.arrived.wait()
        await _send(exporter, clock, holders(T0 + INTERVAL, "a"))  # refused: consumer busy
        transport.gate.set()
        await clock.advance(0)  # the consumer is idle again
        await _send(exporter, clock, holders(T0 + 2 * INTERVAL, "a"))
        await _send(exporter, clock, holders(T0 + 3 * INTERVAL, "a"))
    finally:
        await exporter.shutdown()
    assert [_closed(r) for r in transport.accepted] == [[], [(ALLOC, B)], []]


async def test_a_series_back_before_its_closing_point_was_accepted_is_not_closed() -> None:
    """b left, the request closing it was given up, then b came back: closing it now would end
    a live series."""
    clock = FakeClock()
    transport = Scripted(None, ExportError("unavailable", retryable=False))
    exporter = _exporter(transport, clock)
    await exporter.start(FakeHost(SelfTelemetry()))
    try:
        await _send(
            exporter,
            clock,
            holders(T0, "a", "b"),
            holders(T0 + INTERVAL, "a"),
            holders(T0 + 2 * INTERVAL, "a", "b"),
        )
    finally:
        await exporter.shutdown()
    assert [_closed(r) for r in transport.accepted] == [[], []]


async def test_an_accepted_closing_point_is_not_sent_again() -> None:
    clock = FakeClock()
    transport = Scripted()
    exporter = _exporter(transport, clock)
    await exporter.start(FakeHost(SelfTelemetry()))
    try:
        await _send(
            exporter,
            clock,
            holders(T0, "a", "b"),
            holders(T0 + INTERVAL, "a"),
            holders(T0 + 2 * INTERVAL, "a"),
        )
    finally:
        await exporter.shutdown()
    assert [_closed(r) for r in transport.accepted] == [[], [(ALLOC, B)], []]


# --- across a reload ---------------------------------------------------------------------


def _reloading_settings(kept: KeptListeners) -> Settings:
    telemetry = SelfTelemetry()
    base = make_settings("otlp", Kind.EXPORTER, telemetry)
    return Settings.for_component(base.id, base.kind, telemetry, kept, base.naming)


def _process(time: int, pid: int) -> ResourceMetrics:
    resource = {**gpu_resource(0), semconv.PROCESS_PID: pid}
    metric = _gauge("nvidia.gpu.process.utilization", time, ({semconv.HW_ID: GPU}, 0.25))
    return ResourceMetrics(resource=resource, metrics=(metric,), identity=(GPU, pid))


def _device(time: int) -> ResourceMetrics:
    metric = _gauge("hw.gpu.utilization", time, ({semconv.HW_ID: GPU}, 0.5))
    return ResourceMetrics(resource=gpu_resource(0), metrics=(metric,), identity=GPU)


async def test_a_reload_hands_the_memory_over_and_the_new_exporter_closes_what_ended() -> None:
    kept = KeptListeners()
    clock = FakeClock()
    old_transport, new_transport = Scripted(), Scripted()
    old = _exporter(old_transport, clock, settings=_reloading_settings(kept))
    await old.start(FakeHost(SelfTelemetry()))
    await _send(old, clock, holders(T0, "a", "b"))
    await old.shutdown()
    new = _exporter(new_transport, clock, settings=_reloading_settings(kept))
    await new.start(FakeHost(SelfTelemetry()))
    try:
        await _send(new, clock, holders(T0 + INTERVAL, "a"))
    finally:
        await new.shutdown()
    assert [_closed(r) for r in new_transport.accepted] == [[(ALLOC, B)]]


async def test_closing_points_owed_at_a_reload_are_sent_by_the_new_exporter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kept = KeptListeners()
    clock = FakeClock()
    old_transport = Scripted(None, ExportError("unavailable", retryable=False))
    new_transport = Scripted()
    old = _exporter(old_transport, clock, settings=_reloading_settings(kept))
    await old.start(FakeHost(SelfTelemetry()))
    await _send(old, clock, holders(T0, "a", "b"), holders(T0 + INTERVAL, "a"))
    await old.shutdown()
    new = _exporter(new_transport, clock, settings=_reloading_settings(kept))
    with caplog.at_level(logging.INFO):
        await new.start(FakeHost(SelfTelemetry()))
    took = [r.getMessage() for r in caplog.records if "took over" in r.getMessage()]
    try:
        await _send(new, clock, holders(T0 + 2 * INTERVAL, "a"))
    finally:
        await new.shutdown()
    assert [_closed(r) for r in new_transport.accepted] == [[(ALLOC, B)]]
    # the log says what the new exporter inherited
    assert took == [
        "took over the memory of 1 identities sent before the reload (1 closing points owed)"
    ]


async def test_an_identity_a_reload_stopped_sending_is_closed_once_it_is_overdue() -> None:
    """Processes were reported (`processes: true`) and the reload turned them off: their
    identity is never reported again, and no "gone" marker comes. Once the new exporter has
    waited twice the identity's own reporting interval for it, its series are closed."""
    kept = KeptListeners()
    clock = FakeClock()
    now = [T0]
    old_transport, new_transport = Scripted(), Scripted()
    old = _exporter(old_transport, clock, settings=_reloading_settings(kept), wall=lambda: now[0])
    await old.start(FakeHost(SelfTelemetry()))
    for cycle in range(3):
        now[0] = T0 + cycle * INTERVAL
        await _send(old, clock, (_device(now[0]), _process(now[0], 42)))
    await old.shutdown()
    new = _exporter(new_transport, clock, settings=_reloading_settings(kept), wall=lambda: now[0])
    await new.start(FakeHost(SelfTelemetry()))
    try:
        for cycle in range(3, 7):
            now[0] = T0 + cycle * INTERVAL
            await _send(new, clock, (_device(now[0]),))
    finally:
        await new.shutdown()
    closed = [_closed(r) for r in new_transport.accepted]
    # first batch at cycle 3; the process reported every INTERVAL: overdue after 2 intervals
    # (the pid, an int, reads "" here: it is a point attribute, see test_otlp_ended)
    process = {semconv.HW_ID: GPU, semconv.PROCESS_PID: ""}
    assert closed == [[], [], [("nvidia.gpu.process.utilization", process)], []]


async def test_without_a_reload_the_memory_is_not_taken_by_another_exporter() -> None:
    """Another exporter (another name) starting in the new service sends to its own backend:
    it starts with no memory."""
    kept = KeptListeners()
    clock = FakeClock()
    old = _exporter(Scripted(), clock, settings=_reloading_settings(kept))
    await old.start(FakeHost(SelfTelemetry()))
    await _send(old, clock, holders(T0, "a", "b"))
    await old.shutdown()
    telemetry = SelfTelemetry()
    other_settings = Settings.for_component(
        make_settings("otlp/other", Kind.EXPORTER, telemetry).id, Kind.EXPORTER, telemetry, kept
    )
    transport = Scripted()
    other = _exporter(transport, clock, settings=other_settings)
    await other.start(FakeHost(telemetry))
    try:
        await _send(other, clock, holders(T0 + INTERVAL, "a"))
    finally:
        await other.shutdown()
    assert [_closed(r) for r in transport.accepted] == [[]]


def _mig(time: int, uuid: str) -> ResourceMetrics:
    metric = _gauge("hw.gpu.memory.utilization", time, ({semconv.HW_ID: uuid}, 0.1))
    resource = {**gpu_resource(0), semconv.HW_ID: uuid, semconv.HW_PARENT: GPU}
    return ResourceMetrics(resource=resource, metrics=(metric,), identity=uuid)


async def test_mig_instances_gone_after_a_reconfiguration_are_closed_by_the_new_exporter() -> None:
    """A MIG reconfiguration is picked up by a reload (the nvml receiver finds its devices
    again): the old instances are never reported again and no marker says so."""
    kept = KeptListeners()
    clock = FakeClock()
    now = [T0]
    old_transport, new_transport = Scripted(), Scripted()
    old = _exporter(old_transport, clock, settings=_reloading_settings(kept), wall=lambda: now[0])
    await old.start(FakeHost(SelfTelemetry()))
    for cycle in range(2):
        now[0] = T0 + cycle * INTERVAL
        await _send(old, clock, (_mig(now[0], "MIG-old-1"), _mig(now[0], "MIG-old-2")))
    await old.shutdown()
    new = _exporter(new_transport, clock, settings=_reloading_settings(kept), wall=lambda: now[0])
    await new.start(FakeHost(SelfTelemetry()))
    try:
        for cycle in range(2, 5):
            now[0] = T0 + cycle * INTERVAL
            await _send(new, clock, (_mig(now[0], "MIG-new-1"),))
    finally:
        await new.shutdown()
    closed = [_closed(r) for r in new_transport.accepted]
    metric = "hw.gpu.memory.utilization"
    assert closed == [
        [],
        [],
        [(metric, {semconv.HW_ID: "MIG-old-1"}), (metric, {semconv.HW_ID: "MIG-old-2"})],
    ]


def test_a_closing_point_sent_again_is_owed_no_more_once_that_request_is_accepted() -> None:
    ended = EndedSeries()
    _, receipt = ended.closes(holders(T0, "a", "b"))
    ended.accepted(receipt)
    _, receipt = ended.closes(holders(T0 + INTERVAL, "a"))  # b left: its closing point
    ended.refused(receipt)
    closed, receipt = ended.closes(holders(T0 + 2 * INTERVAL, "a"))  # carries it again
    assert [m.points[0].attributes for rm in closed for m in rm.metrics] == [B]
    ended.accepted(receipt)
    assert ended.owed == 0
    assert ended.closing(holders(T0 + 3 * INTERVAL, "a")) == ()
