"""The allocation series (allocations.py): what each point says of itself, when a device's
series are rebuilt, the marker sent once when its last holder leaves, and the bound on what is
kept."""

from __future__ import annotations

from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import Attributes, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.k8s_attributes.allocations import AllocationSeries, allocation_metric
from otelgpu.processors.k8s_attributes.snapshot import DEVICE_PLUGIN, DRA, Allocation

UUID = "GPU-1111"
INF = float("-inf")
_HW_ID = object()


def _holder(pod: str) -> Attributes:
    return {
        semconv.K8S_NAMESPACE_NAME: "ml",
        semconv.K8S_POD_NAME: pod,
        semconv.K8S_CONTAINER_NAME: "trainer",
    }


def _allocation(*pods: str, sources: tuple[str, ...] = ()) -> Allocation:
    share = 1.0 / len(pods)
    return Allocation(
        device={},
        holders=tuple((_holder(p), share) for p in pods),
        members=frozenset(("ml", p, "trainer") for p in pods),
        sources=sources,
    )


def _device(
    uuid: str = UUID, *, identity: object = _HW_ID, time: int | None = 7, **extra: str
) -> ResourceMetrics:
    """A device's resource, whose identity is its hw.id unless given."""
    points = () if time is None else (NumberDataPoint(attributes={}, time_unix_nano=time, value=1),)
    metric = Metric(
        name="hw.gpu.utilization", unit="1", description="", kind=MetricKind.GAUGE, points=points
    )
    return ResourceMetrics(
        resource={semconv.HW_ID: uuid, semconv.HW_TYPE: "gpu", **extra},
        metrics=(metric,),
        identity=uuid if identity is _HW_ID else identity,
    )


def _point(rm: ResourceMetrics) -> NumberDataPoint:
    (metric,) = rm.metrics
    (point,) = metric.points
    return point


def test_each_point_names_its_device_holder_and_path_and_its_time_is_the_devices() -> None:
    series = AllocationSeries().series(
        _device(extra="x"),
        _allocation("a", "b", sources=(DEVICE_PLUGIN, DRA)),
        (1.0, 2.0),
        5.0,
        changed=(4.0, 3.0),
    )
    assert [_point(rm).attributes for rm in series] == [
        {
            semconv.GPU_ALLOCATION_SOURCE: source,
            semconv.HW_ID: UUID,
            semconv.HW_TYPE: "gpu",
            **_holder(pod),
        }
        for pod, source in (("a", DEVICE_PLUGIN), ("b", DRA))
    ]
    assert [_point(rm).value for rm in series] == [0.5, 0.5]
    assert [_point(rm).time_unix_nano for rm in series] == [7, 7]
    assert [rm.notes for rm in series] == [
        {notes.HOLDER_SINCE: 1.0, notes.HOLDERS_CONFIRMED: 5.0, notes.HOLDERS_CHANGED: 4.0},
        {notes.HOLDER_SINCE: 2.0, notes.HOLDERS_CONFIRMED: 5.0, notes.HOLDERS_CHANGED: 3.0},
    ]
    assert {rm.identity for rm in series} == {(semconv.GPU_ALLOCATION, UUID)}
    assert series[0].resource == {**_device(extra="x").resource, **_holder("a")}


def test_an_allocation_without_sources_is_the_device_plugins() -> None:
    (rm,) = AllocationSeries().series(_device(), _allocation("a"), (1.0,), 5.0)
    assert _point(rm).attributes[semconv.GPU_ALLOCATION_SOURCE] == DEVICE_PLUGIN


def test_holders_without_a_since_of_their_own_hold_since_ever() -> None:
    series = AllocationSeries().series(_device(), _allocation("a", "b"), (), 5.0)
    assert [rm.notes[notes.HOLDER_SINCE] for rm in series if rm.notes] == [INF, INF]


def test_a_device_without_points_gets_a_time_of_now() -> None:
    (rm,) = AllocationSeries().series(_device(time=None), _allocation("a"), (1.0,), 5.0)
    time = _point(rm).time_unix_nano
    assert isinstance(time, int) and time > 0


def test_the_series_identity_is_the_devices_identity_else_its_hw_id() -> None:
    allocations = AllocationSeries()
    (by_identity,) = allocations.series(_device(identity="MIG-2"), _allocation("a"), (1.0,), 5.0)
    assert by_identity.identity == (semconv.GPU_ALLOCATION, "MIG-2")
    (by_hw_id,) = allocations.series(_device("GPU-3", identity=None), _allocation("a"), (), 5.0)
    assert by_hw_id.identity == (semconv.GPU_ALLOCATION, "GPU-3")
    gone = allocations.gone(_device("GPU-3", identity=None))
    assert gone is not None and gone.identity == (semconv.GPU_ALLOCATION, "GPU-3")
    gone = allocations.gone(_device(identity="MIG-2"))
    assert gone is not None and gone.identity == (semconv.GPU_ALLOCATION, "MIG-2")


def test_series_are_rebuilt_only_when_the_allocation_or_the_devices_resource_changes() -> None:
    allocations = AllocationSeries()
    device, found = _device(), _allocation("a")
    (first,) = allocations.series(device, found, (1.0,), 5.0)
    (again,) = allocations.series(device, found, (2.0,), 6.0, changed=(5.5,))
    assert again.resource is first.resource  # unchanged: the same attributes, not rebuilt
    assert again.notes == {
        notes.HOLDER_SINCE: 2.0,  # what the call says, never the earlier call's
        notes.HOLDERS_CONFIRMED: 6.0,
        notes.HOLDERS_CHANGED: 5.5,
    }
    # A new allocation of the same device resource: its holders.
    (moved,) = allocations.series(device, _allocation("b"), (3.0,), 6.0)
    assert moved.resource[semconv.K8S_POD_NAME] == "b"
    assert moved.notes == {
        notes.HOLDER_SINCE: 3.0,
        notes.HOLDERS_CONFIRMED: 6.0,
        notes.HOLDERS_CHANGED: float("-inf"),
    }
    # The same allocation on a new device resource: that resource's attributes.
    (renamed,) = allocations.series(_device(extra="y"), found, (4.0,), 6.0)
    assert renamed.resource["extra"] == "y"
    assert renamed.resource[semconv.K8S_POD_NAME] == "a"


def test_the_last_holder_leaving_empties_the_series_once() -> None:
    allocations = AllocationSeries()
    device = _device()
    assert allocations.gone(device) is None  # never had series: nothing to empty
    allocations.series(device, _allocation("a"), (1.0,), 5.0)
    gone = allocations.gone(device)
    assert gone is not None
    assert (gone.metrics, gone.identity) == ((), (semconv.GPU_ALLOCATION, UUID))
    assert gone.resource == device.resource
    assert allocations.gone(device) is None  # once
    allocations.series(device, _allocation("b"), (2.0,), 5.0)  # a holder again
    assert allocations.gone(device) is not None


def test_what_is_kept_is_bounded_at_4096_devices() -> None:
    allocations = AllocationSeries()
    found = _allocation("a")
    for i in range(4096):
        allocations.series(_device(f"GPU-{i}"), found, (), 5.0)
    # Within the bound every device with series is remembered ...
    assert allocations.gone(_device("GPU-0")) is not None
    allocations.series(_device("GPU-0"), found, (), 5.0)
    # ... and one more forgets the others (memory stays bounded if devices churn).
    allocations.series(_device("GPU-new"), found, (), 5.0)
    assert allocations.gone(_device("GPU-1")) is None
    assert allocations.gone(_device("GPU-new")) is not None


def test_the_allocation_metric() -> None:
    metric = allocation_metric(0.25, 9)
    assert (metric.name, metric.unit, metric.kind) == (
        semconv.GPU_ALLOCATION,
        "1",
        MetricKind.GAUGE,
    )
    assert "hw.id" in metric.description
    (point,) = metric.points
    assert (point.value, point.time_unix_nano) == (0.25, 9)
    assert point.attributes == {semconv.GPU_ALLOCATION_SOURCE: DEVICE_PLUGIN}
    (point,) = allocation_metric(1.0, 9, DRA).points
    assert point.attributes == {semconv.GPU_ALLOCATION_SOURCE: DRA}
    (point,) = allocation_metric(1.0, 9, attributes={"a": "b"}).points
    assert point.attributes == {"a": "b"}
