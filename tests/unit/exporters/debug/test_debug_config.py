"""The debug exporter's defaults, as a bare `debug: {}` block shows them: one summary line per
batch, every batch written, and two batches a second before `sampling_thereafter` applies."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from tests.unit.exporters.debug.within_a_second import gauge_batch, steady_exporter


async def _lines_written(
    batches: int, caplog: pytest.LogCaptureFixture, **options: object
) -> list[str]:
    caplog.set_level(logging.INFO, logger="otelgpu")
    debug = steady_exporter(SelfTelemetry(), **options)
    for _ in range(batches):
        await debug.consume(gauge_batch(1))
    return [r.getMessage() for r in caplog.records]


async def test_by_default_every_batch_gets_one_summary_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lines = await _lines_written(5, caplog)
    assert lines == ["batch: 1 resources, 1 metrics, 1 points"] * 5


async def test_by_default_the_first_two_batches_of_a_second_are_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lines = await _lines_written(4, caplog, sampling_thereafter=100)
    assert len(lines) == 2
