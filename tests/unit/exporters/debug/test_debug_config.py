"""The debug exporter's defaults, as a bare `debug: {}` block shows them: one summary line per
batch, every batch written, and two batches a second before `sampling_thereafter` applies."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.debug.config import DebugExporterConfig
from otelgpu.exporters.debug.exporter import DebugExporter
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.conftest import make_settings

BATCH = (
    ResourceMetrics(
        resource={"hw.id": "GPU-1"},
        metrics=(
            Metric(
                name="hw.gpu.utilization",
                unit="1",
                description="",
                kind=MetricKind.GAUGE,
                points=(NumberDataPoint(attributes={}, time_unix_nano=1, value=0.5),),
            ),
        ),
    ),
)


async def _lines_written(
    batches: int, caplog: pytest.LogCaptureFixture, **options: object
) -> list[str]:
    caplog.set_level(logging.INFO, logger="otelgpu")
    settings = make_settings("debug", Kind.EXPORTER, SelfTelemetry())
    config = DebugExporterConfig.model_validate(options)
    exporter = DebugExporter(settings, config, clock=lambda: 100.0)  # all in one second
    for _ in range(batches):
        await exporter.consume(BATCH)
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
