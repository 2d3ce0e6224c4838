"""The debug exporter's sampling tests share these: an exporter whose clock never moves (every
batch falls in the same second) and a batch of one gauge with a chosen number of points."""

from __future__ import annotations

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.debug.config import DebugExporterConfig
from otelgpu.exporters.debug.exporter import DebugExporter
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.conftest import make_settings


def steady_exporter(telemetry: SelfTelemetry, **options: object) -> DebugExporter:
    """A debug exporter with `options`, all of whose batches come within one second."""
    settings = make_settings("debug", Kind.EXPORTER, telemetry)
    config = DebugExporterConfig.model_validate(options)
    return DebugExporter(settings, config, clock=lambda: 100.0)


def gauge_batch(points: int) -> Batch:
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
