"""The debug exporter case by case: which batches of a second sampling writes, and how its
points are counted in self-telemetry."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from tests.unit.exporters.debug.within_a_second import gauge_batch, steady_exporter


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
    exporter = steady_exporter(SelfTelemetry(), sampling_initial=2, sampling_thereafter=3)
    for n in range(1, 12):  # batch n holds n points
        await exporter.consume(gauge_batch(n))
    written = [r.getMessage() for r in caplog.records]
    # The first two, then the 3rd, 6th and 9th batch after them.
    assert written == [f"batch: 1 resources, 1 metrics, {n} points" for n in (1, 2, 5, 8, 11)]


async def test_every_batch_counts_its_points_as_sent_and_none_as_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="otelgpu")
    telemetry = SelfTelemetry()
    exporter = steady_exporter(telemetry, sampling_initial=1, sampling_thereafter=100)
    await exporter.consume(gauge_batch(3))
    await exporter.consume(gauge_batch(4))  # sampled out: not written, still delivered
    assert len(caplog.records) == 1
    assert _counted(telemetry, "otelgpu_exporter_sent_points_total") == 7
    assert _counted(telemetry, "otelgpu_exporter_failed_points_total") == 0
