"""The debug exporter case by case: which batches of a second sampling writes, and how its
points are counted in self-telemetry."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.debug.config import DebugExporterConfig
from otelgpu.exporters.debug.exporter import DebugExporter
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.conftest import make_settings


def _batch(points: int) -> Batch:
    """One resource with one gauge of `points` points (the summary line shows the number)."""
    metric = Metric(
        name="hw.gpu.utilization",
        unit="1",
        description="",
        kind=MetricKind.GAUGE,
        points=tuple(
            NumberDataPoint(attributes={"i": i}, time_unix_nano=1, value=0.5) for i in range(points)
        ),
    )
    return (ResourceMetrics(resource={"hw.id": "GPU-1"}, metrics=(metric,)),)


def _exporter(telemetry: SelfTelemetry, **options: object) -> DebugExporter:
    settings = make_settings("debug", Kind.EXPORTER, telemetry)
    config = DebugExporterConfig.model_validate(options)
    return DebugExporter(settings, config, clock=lambda: 100.0)  # all in one second


def _counted(telemetry: SelfTelemetry, name: str) -> float:
    for metric in telemetry.collect().metrics:
        if metric.name == name:
            for point in metric.points:
                if point.attributes.get("exporter") == "debug":
                    return point.value
    return 0


async def test_after_the_initial_batches_every_nth_one_of_the_second_is_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="otelgpu")
    exporter = _exporter(SelfTelemetry(), sampling_initial=2, sampling_thereafter=3)
    for n in range(1, 12):  # batch n holds n points
        await exporter.consume(_batch(n))
    written = [r.getMessage() for r in caplog.records]
    # The first two, then the 3rd, 6th and 9th batch after them.
    assert written == [f"batch: 1 resources, 1 metrics, {n} points" for n in (1, 2, 5, 8, 11)]


async def test_every_batch_counts_its_points_as_sent_and_none_as_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="otelgpu")
    telemetry = SelfTelemetry()
    exporter = _exporter(telemetry, sampling_initial=1, sampling_thereafter=100)
    await exporter.consume(_batch(3))
    await exporter.consume(_batch(4))  # sampled out: not written, still delivered
    assert len(caplog.records) == 1
    assert _counted(telemetry, "otelgpu_exporter_sent_points_total") == 7
    assert _counted(telemetry, "otelgpu_exporter_failed_points_total") == 0
