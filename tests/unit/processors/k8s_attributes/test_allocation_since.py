"""The notes of an allocation series say what the caller says now: its built attributes are
reused while the allocation and the device's resource stay the same objects, but since when
each holder is listed is never taken from the earlier call."""

from __future__ import annotations

from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.k8s_attributes.allocations import AllocationSeries
from otelgpu.processors.k8s_attributes.snapshot import Allocation

HOLDER = {semconv.K8S_NAMESPACE_NAME: "ml", semconv.K8S_POD_NAME: "a", "k8s.container.name": "c"}


def _device() -> ResourceMetrics:
    point = NumberDataPoint(attributes={}, time_unix_nano=7, value=1)
    metric = Metric(
        name="hw.gpu.utilization", unit="1", description="", kind=MetricKind.GAUGE, points=(point,)
    )
    return ResourceMetrics(resource={semconv.HW_ID: "GPU-1"}, metrics=(metric,), identity="GPU-1")


def test_a_reused_series_notes_the_since_it_is_given_now() -> None:
    allocations, device = AllocationSeries(), _device()
    found = Allocation(device={}, holders=((HOLDER, 1.0),), members=frozenset({("ml", "a", "c")}))
    (first,) = allocations.series(device, found, (1.0,), 5.0)
    (again,) = allocations.series(device, found, (2.0,), 6.0)
    assert again.resource is first.resource  # the built attributes are reused
    assert again.notes is not None and again.notes[notes.HOLDER_SINCE] == 2.0
    (unknown,) = allocations.series(device, found, (), 6.0)  # no since per holder: since ever
    assert unknown.notes is not None and unknown.notes[notes.HOLDER_SINCE] == float("-inf")
