"""The debug exporter's Collector options: verbosity normal, sampling, stdout output; and how its
points are counted in self-telemetry."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.debug.config import DebugExporterConfig
from otelgpu.exporters.debug.exporter import DebugExporter
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.conftest import make_settings
from tests.unit.exporters.debug.within_a_second import gauge_batch, steady_exporter

BATCH = (
    ResourceMetrics(
        resource={"hw.id": "GPU-1", "k8s.pod.name": "train-0"},
        metrics=(
            Metric(
                name="hw.gpu.utilization",
                unit="1",
                description="",
                kind=MetricKind.GAUGE,
                points=(
                    NumberDataPoint(
                        attributes={"hw.gpu.task": "general"}, time_unix_nano=1, value=0.5
                    ),
                ),
            ),
        ),
    ),
)


def _exporter(clock: list[float] | None = None, **options: object) -> DebugExporter:
    settings = make_settings("debug", Kind.EXPORTER, SelfTelemetry())
    config = DebugExporterConfig.model_validate(options)
    if clock is None:
        return DebugExporter(settings, config)
    return DebugExporter(settings, config, clock=lambda: clock[0])


async def test_normal_verbosity_writes_attributes_as_json(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="otelgpu")
    await _exporter(verbosity="normal").consume(BATCH)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "batch: 1 resources, 1 metrics, 1 points"
    resource = json.loads(lines[1].removeprefix("resource "))
    assert resource == {"hw.id": "GPU-1", "k8s.pod.name": "train-0"}
    assert lines[2] == '  hw.gpu.utilization{"hw.gpu.task": "general"} = 0.5'


async def test_sampling_keeps_the_first_batches_of_each_second_then_every_nth(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="otelgpu")
    clock = [100.0]
    exporter = _exporter(clock, sampling_initial=2, sampling_thereafter=3)
    for _ in range(8):  # batches 1, 2, then 5 and 8 are written
        await exporter.consume(BATCH)
    clock[0] = 101.0  # a new second starts over
    await exporter.consume(BATCH)
    assert sum("batch:" in r.getMessage() for r in caplog.records) == 5


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


async def test_use_internal_logger_false_prints_to_stdout(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="otelgpu")
    await _exporter(verbosity="detailed", use_internal_logger=False).consume(BATCH)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "batch: 1 resources, 1 metrics, 1 points"
    assert out[2] == '  hw.gpu.utilization{"hw.gpu.task": "general"} = 0.5 1 (gauge)'
    assert not caplog.records


async def test_each_printed_line_is_flushed(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout is a pipe in a container: a line held in its buffer would reach the log only
    when the buffer fills or the agent exits."""
    events: list[str] = []

    class Pipe:
        def write(self, text: str) -> int:
            events.append("write")
            return len(text)

        def flush(self) -> None:
            events.append("flush")

    monkeypatch.setattr("sys.stdout", Pipe())
    await _exporter(verbosity="basic", use_internal_logger=False).consume(BATCH)
    assert events[-1] == "flush" and "flush" in events


async def test_detailed_lines_leave_out_a_missing_unit_and_keep_non_ascii_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (resource,) = BATCH
    (metric,) = resource.metrics
    unitless = (
        ResourceMetrics(
            resource={"k8s.pod.name": "entraînement-0"},
            metrics=(replace(metric, unit=""),),
        ),
    )
    await _exporter(verbosity="detailed", use_internal_logger=False).consume(unitless)
    out = capsys.readouterr().out.splitlines()
    assert out[1] == 'resource {"k8s.pod.name": "entraînement-0"}'
    assert out[2] == '  hw.gpu.utilization{"hw.gpu.task": "general"} = 0.5 (gauge)'
