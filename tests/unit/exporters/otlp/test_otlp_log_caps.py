"""The OTLP endpoint's error and partial-success texts are capped in the log."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.errors import ExportError
from otelgpu.component.log_limits import PEER_TEXT_LIMIT
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.exporter import ExportResponse
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import numbered_batch
from tests.unit.exporters.otlp.test_otlp_exporter import ScriptedTransport, make

HUGE = "y" * 70_000


@pytest.mark.parametrize(
    "outcome",
    [
        ExportResponse(rejected=1, message=HUGE),
        ExportError(f"HTTP 400: {HUGE}", retryable=False),
    ],
    ids=["partial_success", "error"],
)
async def test_peer_text_is_capped(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture, outcome: object
) -> None:
    exporter = make(telemetry, clock, ScriptedTransport(outcome))
    await exporter.start(FakeHost(telemetry))
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        await exporter.consume(numbered_batch(0, 2))
        await clock.advance(0)
    await exporter.shutdown()
    lines = [r.getMessage() for r in caplog.records]
    assert lines and all(len(line) < PEER_TEXT_LIMIT + 200 for line in lines)
