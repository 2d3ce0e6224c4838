"""A series that ends is closed downstream: the next request carries one point flagged
FLAG_NO_RECORDED_VALUE for it, which Prometheus' OTLP endpoint and the Collector's Prometheus
exporters turn into the end of the series (without it they serve the last value for minutes)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import DataPointFlags

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.encode import encode_bytes, encode_closing_bytes
from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.exporters.otlp.exporter import OtlpExporter
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, Metric, MetricKind, ResourceMetrics
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import INTERVAL, T0, Recording, gpu_resource, holders
from tests.unit.exporters.otlp.batches import gauge as _gauge

GPU = gpu_resource(0)[semconv.HW_ID]
FLAG = DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK


def gpu(time: int, state: str = "ok", pod: str = "a") -> Batch:
    """A GPU's `up` (its health state a point attribute) and utilization, held by `pod`."""
    return (
        ResourceMetrics(
            resource={**gpu_resource(0), semconv.K8S_POD_NAME: pod},
            metrics=(
                _gauge("nvidia.gpu.up", time, ({semconv.HW_ID: GPU, "hw.state": state}, 1.0)),
                _gauge("hw.gpu.utilization", time, ({semconv.HW_ID: GPU}, 0.5)),
            ),
            identity=GPU,
        ),
    )


def gone(identity: Any) -> ResourceMetrics:
    return ResourceMetrics(resource=gpu_resource(0), metrics=(), identity=identity)


def points(request: ExportMetricsServiceRequest) -> list[tuple[str, dict[str, Any], Any]]:
    """(metric, point attributes, value or "closed at T") of every point of a request."""
    out = []
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                data = getattr(metric, metric.WhichOneof("data"))
                for p in data.data_points:
                    attributes = {kv.key: kv.value.string_value for kv in p.attributes}
                    if p.flags & FLAG:
                        assert math.isnan(p.as_double)
                        value: Any = f"closed at {p.time_unix_nano}"
                    else:
                        value = p.as_double
                    out.append((metric.name, attributes, value))
    return sorted(out, key=repr)


async def _requests(*batches: Batch) -> list[ExportMetricsServiceRequest]:
    telemetry, clock, transport = SelfTelemetry(), FakeClock(), Recording()
    exporter = OtlpExporter(
        make_settings("otlp", Kind.EXPORTER, telemetry),
        OtlpExporterConfig.model_validate({"endpoint": "localhost:4317"}),
        transport,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    await exporter.start(FakeHost(telemetry))
    try:
        for batch in batches:
            await exporter.consume(batch)
            await clock.advance(0)
    finally:
        await exporter.shutdown()
    assert len(transport.requests) == len(batches)
    return transport.requests


async def test_a_holder_leaving_a_shared_gpu_is_closed_in_the_next_request() -> None:
    first, second, third = await _requests(
        holders(T0, "a", "b"), holders(T0 + INTERVAL, "a"), holders(T0 + 2 * INTERVAL, "a")
    )
    alloc = semconv.GPU_ALLOCATION
    a = {semconv.HW_ID: GPU, semconv.K8S_POD_NAME: "a"}
    b = {semconv.HW_ID: GPU, semconv.K8S_POD_NAME: "b"}
    assert points(first) == [(alloc, a, 0.5), (alloc, b, 0.5)]
    # b's share ends when b leaves, at the time a's share is reported alone; once.
    assert points(second) == [(alloc, a, 1.0), (alloc, b, f"closed at {T0 + INTERVAL}")]
    assert points(third) == [(alloc, a, 1.0)]


async def test_the_last_holder_leaving_closes_its_share() -> None:
    _, second = await _requests(holders(T0, "a"), (gone((semconv.GPU_ALLOCATION, GPU)),))
    (closed,) = points(second)
    assert closed[:2] == (
        semconv.GPU_ALLOCATION,
        {semconv.HW_ID: GPU, semconv.K8S_POD_NAME: "a"},
    )
    assert closed[2].startswith("closed at ")
    assert int(closed[2].removeprefix("closed at ")) >= T0 + 1_000_000  # after its last point


async def test_a_gpu_back_to_ok_closes_its_degraded_up_series() -> None:
    _, second = await _requests(gpu(T0, "degraded"), gpu(T0 + INTERVAL, "ok"))
    assert points(second) == [
        ("hw.gpu.utilization", {semconv.HW_ID: GPU}, 0.5),
        (
            "nvidia.gpu.up",
            {semconv.HW_ID: GPU, "hw.state": "degraded"},
            f"closed at {T0 + INTERVAL}",
        ),
        ("nvidia.gpu.up", {semconv.HW_ID: GPU, "hw.state": "ok"}, 1.0),
    ]


async def test_a_gpu_whose_pod_changed_closes_nothing() -> None:
    """Only the resource changed: a backend that keeps only point attributes sees one series
    going on, and a closing point would end the live series there."""
    _, second = await _requests(gpu(T0, pod="a"), gpu(T0 + INTERVAL, pod="b"))
    assert [value for *_, value in points(second)] == [0.5, 1.0]
    (resource,) = [rm.resource for rm in second.resource_metrics]
    assert {"key": semconv.K8S_POD_NAME, "value": {"string_value": "b"}} in [
        {"key": kv.key, "value": {"string_value": kv.value.string_value}}
        for kv in resource.attributes
    ]


async def test_an_unchanged_identity_closes_nothing() -> None:
    requests = await _requests(*(gpu(T0 + i * INTERVAL) for i in range(3)))
    assert all(
        not p.flags
        for request in requests
        for rm in request.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        for p in m.gauge.data_points
    )


def test_a_closing_point_is_the_message_the_protobuf_library_writes() -> None:
    closing = EndedSeries().closing(holders(T0, "a", "b")) + EndedSeries().closing(())
    assert closing == ()  # nothing was sent before: nothing to close
    ended = EndedSeries()
    ended.closing(holders(T0, "a", "b"))
    (rm,) = ended.closing(holders(T0 + INTERVAL, "a"))
    expected = ExportMetricsServiceRequest.FromString(encode_bytes((rm,)))
    for point in expected.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points:
        point.flags = FLAG
        point.as_double = math.nan
    assert encode_closing_bytes((rm,)) == expected.SerializeToString()


def test_the_memory_is_bounded_oldest_identity_first() -> None:
    ended = EndedSeries(limit=2)
    for index in range(3):
        ended.closing((ResourceMetrics(resource={}, metrics=gpu(T0)[0].metrics, identity=index),))
    assert len(ended) == 2
    # identity 0 was forgotten: its end cannot be told any more; identity 2's still can
    assert ended.closing((gone(0),)) == ()
    assert len(ended.closing((gone(2),))) == 1


@pytest.mark.parametrize("before_time", [T0, T0 + 2 * INTERVAL])
def test_a_closing_point_comes_after_the_series_last_point(before_time: int) -> None:
    """A backend refuses a point older than the series' last one: the closing point is never
    earlier, even when the identity's new time is (a clock stepped back)."""
    ended = EndedSeries(wall=lambda: T0)
    ended.closing(gpu(before_time, "degraded"))
    (rm,) = ended.closing(gpu(T0 + INTERVAL, "ok"))
    (point,) = rm.metrics[0].points
    assert point.time_unix_nano == max(T0 + INTERVAL, before_time + 1_000_000)


def test_the_default_memory_holds_the_documented_number_of_identities() -> None:
    """The otlp README promises the last series of 16,384 identities."""
    metrics = gpu(T0)[0].metrics[:1]
    batch = tuple(
        ResourceMetrics(resource={}, metrics=metrics, identity=index) for index in range(16_385)
    )
    ended = EndedSeries()
    ended.closing(batch)
    assert len(ended) == 16_384


async def test_a_metric_reported_with_no_points_closes_what_it_had() -> None:
    """A metric reported without points has no series now; its attribute mapping, shared with
    another metric that goes on, is told apart by the metric's name."""
    shared = {semconv.HW_ID: GPU}

    def both(time: int, first: bool) -> Batch:
        metrics = (
            _gauge("hw.gpu.utilization", time, *([(shared, 0.5)] if first else [])),
            _gauge("nvidia.gpu.other", time, *([] if first else [(shared, 0.5)])),
        )
        return (ResourceMetrics(resource=gpu_resource(0), metrics=metrics, identity=GPU),)

    _, second = await _requests(both(T0, True), both(T0 + INTERVAL, False))
    assert points(second) == [
        ("hw.gpu.utilization", shared, f"closed at {T0 + INTERVAL}"),
        ("nvidia.gpu.other", shared, 0.5),
    ]


def test_a_metric_reported_with_no_points_closes_at_its_resource_s_first_point() -> None:
    """The report's first point (of its first metric with points) is the time of a metric
    without points: what it had closes then, not at a later point of the report."""
    ended = EndedSeries(wall=lambda: T0)
    first = {semconv.HW_ID: GPU, "hw.state": "ok"}
    later = {semconv.HW_ID: GPU, "hw.state": "degraded"}

    def report(time: int, with_points: bool) -> Batch:
        up = _gauge("nvidia.gpu.up", time, (first, 1.0), (later, 0.0))
        up = replace(up, points=(up.points[0], replace(up.points[1], time_unix_nano=time + 5)))
        held = [({semconv.HW_ID: GPU}, 0.5)] if with_points else []
        util = _gauge("hw.gpu.utilization", time, *held)
        return (ResourceMetrics(resource=gpu_resource(0), metrics=(up, util), identity=GPU),)

    ended.closing(report(T0, True))
    closed = ended.closing(report(T0 + INTERVAL, False))
    assert [(m.name, m.points[0].time_unix_nano) for rm in closed for m in rm.metrics] == [
        ("hw.gpu.utilization", T0 + INTERVAL)
    ]


async def test_a_metric_an_identity_does_not_report_this_time_is_left_alone() -> None:
    """Two pipelines send one GPU's metrics to one exporter, each its own: neither batch closes
    the other's series (as the Prometheus exporter's sets, a batch replaces the metrics it
    reports). A "gone" marker closes everything either sent."""
    utilization, up = gpu(T0)[0].metrics[1], gpu(T0)[0].metrics[0]

    def only(metric: Metric) -> Batch:
        return (ResourceMetrics(resource=gpu_resource(0), metrics=(metric,), identity=GPU),)

    requests = await _requests(only(utilization), only(up), only(utilization), (gone(GPU),))
    closed = [[p[:2] for p in points(r) if str(p[2]).startswith("closed")] for r in requests]
    assert closed == [
        [],
        [],
        [],
        [
            ("hw.gpu.utilization", {semconv.HW_ID: GPU}),
            ("nvidia.gpu.up", {semconv.HW_ID: GPU, "hw.state": "ok"}),
        ],
    ]


async def test_an_ended_process_is_closed_under_its_pid() -> None:
    """A process's points carry its pid as a point attribute (what tells two processes apart
    where only point attributes are labels): its closing points carry it too."""
    identity = ("process", GPU, 4242)
    resource = {**gpu_resource(0), semconv.PROCESS_PID: 4242}
    metric = _gauge("nvidia.gpu.process.utilization", T0, ({semconv.HW_ID: GPU}, 0.25))
    _, second = await _requests(
        (ResourceMetrics(resource=resource, metrics=(metric,), identity=identity),),
        (ResourceMetrics(resource=resource, metrics=(), identity=identity),),
    )
    ((name, attributes, value),) = points(second)
    assert (name, str(value).startswith("closed")) == ("nvidia.gpu.process.utilization", True)
    assert attributes == {semconv.HW_ID: GPU, semconv.PROCESS_PID: ""}  # an int: see below
    (point,) = second.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points
    assert {kv.key: kv.value.int_value for kv in point.attributes}[semconv.PROCESS_PID] == 4242


def _one(metric: Metric, identity: Any = GPU) -> ResourceMetrics:
    return ResourceMetrics(resource=gpu_resource(0), metrics=(metric,), identity=identity)


async def test_two_pipelines_each_close_their_own_series() -> None:
    """Pipeline 1 sends the GPU's health, pipeline 2 its utilization, to one exporter: the
    health state pipeline 1 left is closed though pipeline 2 reported in between."""
    ok, degraded = gpu(T0, "ok")[0].metrics[0], gpu(T0 + INTERVAL, "degraded")[0].metrics[0]
    utilization = gpu(T0)[0].metrics[1]
    *_, last = await _requests((_one(ok),), (_one(utilization),), (_one(degraded),))
    closed = [p[:2] for p in points(last) if str(p[2]).startswith("closed")]
    assert closed == [("nvidia.gpu.up", {semconv.HW_ID: GPU, "hw.state": "ok"})]


def test_a_closing_point_comes_after_its_own_metrics_last_point() -> None:
    """Metrics of one identity at different times: the closing point follows the last point
    of its own metric, not the identity's first (a backend refuses an older point)."""
    ended = EndedSeries()
    ended.closing(
        (
            _one(_gauge("a", T0, ({"x": "1"}, 1.0))),
            _one(_gauge("b", T0 + 5 * INTERVAL, ({"nic": "eth1"}, 1.0))),
        )
    )
    (rm,) = ended.closing(
        (
            _one(_gauge("a", T0, ({"x": "1"}, 1.0))),
            _one(_gauge("b", T0 + INTERVAL, ({"nic": "eth0"}, 1.0))),
        )
    )
    (point,) = rm.metrics[0].points
    assert (rm.metrics[0].name, point.attributes) == ("b", {"nic": "eth1"})
    assert point.time_unix_nano == T0 + 5 * INTERVAL + 1_000_000


def test_each_closing_point_is_a_metric_of_its_own() -> None:
    """The Collector's prometheus exporter drops the series of a metric's first flagged point
    and skips the rest of that metric: three ended series are three metrics."""
    tasks = [{semconv.HW_ID: GPU, "task": t} for t in ("sm", "encoder", "decoder")]
    ended = EndedSeries()
    ended.closing((_one(_gauge("p", T0, *((t, 0.1) for t in tasks)), identity="proc"),))
    (rm,) = ended.closing((gone("proc"),))
    assert [(m.name, len(m.points)) for m in rm.metrics] == [("p", 1)] * 3
    assert [m.points[0].attributes for m in rm.metrics] == tasks


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("1", 1),
        (1, 1.0),
        (True, "true"),
        (False, "false"),
        (math.nan, float("nan")),
        (math.nan, "NaN"),
    ],
    ids=["str-int", "int-float", "true-str", "false-str", "nan", "nan-str"],
)
def test_a_value_that_only_changed_type_closes_nothing(before: Any, after: Any) -> None:
    """A backend's labels are text: "1" and 1 are one series there, and closing the old one
    would end the live one. (A NaN is a new object each cycle and never equal to itself.)"""
    ended = EndedSeries()
    ended.closing((_one(_gauge("m", T0, ({"slot": before}, 1.0), ({"other": "x"}, 1.0))),))
    now = (_one(_gauge("m", T0 + INTERVAL, ({"slot": after}, 1.0))),)
    closed = ended.closing(now)
    assert [m.points[0].attributes for rm in closed for m in rm.metrics] == [{"other": "x"}]


def test_an_identity_unreported_for_five_minutes_is_forgotten() -> None:
    """Identities that never say they are gone (a kubelet_stats pod) do not pile up: by then a
    backend's lookback has ended their series anyway."""
    clock = [T0]
    ended = EndedSeries(wall=lambda: clock[0])
    ended.closing((_one(_gauge("m", T0, ({"a": "1"}, 1.0)), identity="pod-a"),))
    clock[0] += 5 * 60 * 10**9 + INTERVAL
    ended.closing((_one(_gauge("m", clock[0], ({"a": "1"}, 1.0)), identity="pod-b"),))
    assert len(ended) == 1
    assert ended.closing((gone("pod-a"),)) == ()  # nothing left to close


async def test_an_unhashable_identity_is_sent_and_not_tracked() -> None:
    (request,) = await _requests((_one(gpu(T0)[0].metrics[1], identity=("gpu", {"x": 1})),))
    assert [name for name, *_ in points(request)] == ["hw.gpu.utilization"]


def _resources(closed: Batch) -> list[tuple[str, Any, Any]]:
    """(metric, unit, the resource's pod) of each closing point."""
    return [
        (m.name, m.unit, rm.resource.get(semconv.K8S_POD_NAME)) for rm in closed for m in rm.metrics
    ]


def test_a_steady_identity_closes_under_its_latest_resource_and_after_its_latest_time() -> None:
    """Cycles that send the same series renew the memory in place: the resource (the pod moved)
    and the time the next closing point is sent under and after are the latest ones."""
    ended = EndedSeries(wall=lambda: T0)
    ended.closing(gpu(T0, "ok", pod="a"))
    assert ended.closing(gpu(T0 + 5 * INTERVAL, "ok", pod="b")) == ()
    closed = ended.closing(gpu(T0 + INTERVAL, "degraded", pod="b"))  # a clock stepped back
    assert _resources(closed) == [("nvidia.gpu.up", "1", "b")]
    assert closed[0].metrics[0].points[0].time_unix_nano == T0 + 5 * INTERVAL + 1_000_000


@pytest.mark.parametrize(
    "changed",
    [{"unit": "%"}, {"description": "new"}, {"kind": MetricKind.SUM}, {"monotonic": True}],
    ids=["unit", "description", "kind", "monotonic"],
)
def test_a_closing_point_carries_the_metrics_latest_descriptor(changed: dict[str, Any]) -> None:
    ended = EndedSeries()
    first = _gauge("m", T0, ({"a": "1"}, 1.0))
    ended.closing((_one(first),))
    ended.closing((_one(replace(first, **changed)),))
    (rm,) = ended.closing((_one(_gauge("m", T0 + INTERVAL, ({"a": "2"}, 1.0))),))
    (metric,) = rm.metrics
    assert {key: getattr(metric, key) for key in changed} == changed


def test_a_metric_spanning_resources_closes_after_its_latest_part() -> None:
    """The allocation series of a shared GPU: one resource per holder, one metric."""
    ended = EndedSeries()
    late = holders(T0, "b")[0]
    late = replace(
        late,
        metrics=(
            replace(
                late.metrics[0],
                points=(replace(late.metrics[0].points[0], time_unix_nano=T0 + 3 * INTERVAL),),
            ),
        ),
    )
    ended.closing((holders(T0, "a")[0], late))
    (rm,) = ended.closing(holders(T0 + INTERVAL, "a"))
    assert rm.metrics[0].points[0].time_unix_nano == T0 + 3 * INTERVAL + 1_000_000


def test_a_metric_spanning_resources_closes_each_point_under_its_own_resource() -> None:
    """A shared GPU's allocation: holder b's series closes under b's resource, not a's."""
    ended = EndedSeries()
    ended.closing(holders(T0, "a", "b"))
    closed = ended.closing((gone((semconv.GPU_ALLOCATION, GPU)),))
    sent_under = sorted(
        (rm.resource[semconv.K8S_POD_NAME], point.attributes[semconv.K8S_POD_NAME])
        for rm in closed
        for metric in rm.metrics
        for point in metric.points
    )
    assert sent_under == [("a", "a"), ("b", "b")]


def test_a_metric_sent_under_a_new_name_is_remembered_beside_the_old_one() -> None:
    """The same points under another name (descriptor and attributes otherwise unchanged):
    the old name is left alone, the new one is remembered; both close when the GPU goes."""
    ended = EndedSeries()

    def named(name: str, time: int) -> Batch:
        return (
            ResourceMetrics(
                resource=gpu_resource(0),
                metrics=(_gauge(name, time, ({semconv.HW_ID: GPU}, 0.5)),),
                identity=GPU,
            ),
        )

    ended.closing(named("old.name", T0))
    ended.closing(named("old.name", T0 + INTERVAL))
    assert ended.closing(named("new.name", T0 + 2 * INTERVAL)) == ()
    closed = ended.closing((gone(GPU),))
    assert sorted(m.name for rm in closed for m in rm.metrics) == ["new.name", "old.name"]


def test_an_identity_whose_series_changed_closes_under_the_resource_it_changed_with() -> None:
    """The GPU's up state and its pod changed in one report (told apart series by series):
    what it holds then closes under that report's resource, the pod's."""
    ended = EndedSeries()
    ended.closing(gpu(T0, "ok", pod="a"))
    ended.closing(gpu(T0 + INTERVAL, "degraded", pod="b"))
    closed = ended.closing((gone(GPU),))
    assert [rm.resource.get(semconv.K8S_POD_NAME) for rm in closed] == ["b"]
    assert sorted(m.name for rm in closed for m in rm.metrics) == [
        "hw.gpu.utilization",
        "nvidia.gpu.up",
    ]


def test_a_gone_marker_closes_after_the_last_point_whatever_the_clock() -> None:
    ended = EndedSeries(wall=lambda: T0)  # the agent's clock behind the points' time
    ended.closing((_one(_gauge("m", T0 + INTERVAL, ({"a": "1"}, 1.0)), identity="p"),))
    (rm,) = ended.closing((gone("p"),))
    assert rm.metrics[0].points[0].time_unix_nano == T0 + INTERVAL + 1_000_000


def test_an_identity_reporting_steadily_is_never_forgotten() -> None:
    clock = [T0]
    ended = EndedSeries(wall=lambda: clock[0])
    for _ in range(40):  # more than five minutes of the same series
        ended.closing(gpu(clock[0]))
        assert len(ended) == 1
        clock[0] += INTERVAL
    assert len(ended.closing(gpu(clock[0], "degraded"))) == 1


def test_a_changed_point_is_never_taken_for_a_steady_one() -> None:
    """The in-place renewal compares every point: here the other metric's mapping is the very
    same object, so only the changed point can tell the cycles apart."""
    shared = {semconv.HW_ID: GPU}
    ok, degraded = {**shared, "hw.state": "ok"}, {**shared, "hw.state": "degraded"}

    def cycle(state: dict[str, Any], time: int) -> Batch:
        metrics = (_gauge("nvidia.gpu.up", time, (state, 1.0)), _gauge("u", time, (shared, 0.5)))
        return (ResourceMetrics(resource=gpu_resource(0), metrics=metrics, identity=GPU),)

    ended = EndedSeries()
    ended.closing(cycle(ok, T0))
    (rm,) = ended.closing(cycle(degraded, T0 + INTERVAL))
    assert [m.points[0].attributes for m in rm.metrics] == [ok]


@pytest.mark.parametrize("field", ["scope", "scope_version", "schema_url"])
def test_a_steady_identity_renews_its_scope_and_a_metric_without_points(field: str) -> None:
    ended = EndedSeries()
    for value in ("1", "2"):
        metrics = (_gauge("m", T0, ({"a": "1"}, 1.0)), _gauge("empty", T0))
        ended.closing(
            (ResourceMetrics(resource={}, metrics=metrics, identity="x", **{field: value}),)
        )
    now = ResourceMetrics(resource={}, metrics=(_gauge("m", T0 + INTERVAL),), identity="x")
    (rm,) = ended.closing((replace(now, **{field: "3"}),))
    assert (getattr(rm, field), rm.metrics[0].name) == ("2", "m")
