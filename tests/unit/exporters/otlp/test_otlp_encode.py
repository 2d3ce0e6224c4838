"""The encoder: the internal model maps 1:1 onto opentelemetry-proto messages."""

from __future__ import annotations

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from otelgpu.exporters.otlp import encode
from otelgpu.exporters.otlp.encode import (
    AttributeCache,
    any_value,
    encode_bytes,
    encode_closing_bytes,
)
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.pdata.semconv import PROCESS_PID
from tests.unit.exporters.otlp.batches import START, T0, gpu_metrics, gpu_resource

CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


def _attrs(kvs: object) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in kvs:  # type: ignore[attr-defined]
        field = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, field)
    return out


def _attr_list(kvs: object) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for kv in kvs:  # type: ignore[attr-defined]
        out.append((kv.key, getattr(kv.value, kv.value.WhichOneof("value"))))
    return out


def _gauge(name: str, *points: NumberDataPoint) -> Metric:
    return Metric(
        name=name, unit="1", description=f"{name} d", kind=MetricKind.GAUGE, points=points
    )


def test_resource_scope_and_metric_descriptors() -> None:
    rm = ResourceMetrics(resource=gpu_resource(3), metrics=gpu_metrics(), scope_version="0.1.0")
    request = encode((rm,))
    assert len(request.resource_metrics) == 1
    out = request.resource_metrics[0]
    assert _attrs(out.resource.attributes) == gpu_resource(3)
    (scope,) = out.scope_metrics
    assert (scope.scope.name, scope.scope.version) == ("otelgpu", "0.1.0")
    described = [(m.name, m.unit, m.description, m.WhichOneof("data")) for m in scope.metrics]
    assert described == [
        ("hw.gpu.utilization", "1", "Fraction of time the GPU was busy", "gauge"),
        ("hw.energy", "J", "Energy consumed since the driver loaded", "sum"),
        ("hw.gpu.memory.usage", "By", "GPU memory in use", "sum"),
    ]


def test_every_point_of_a_process_resource_carries_the_pid_once_its_own_where_it_has_one() -> None:
    points = (
        NumberDataPoint(attributes={}, time_unix_nano=T0, value=1),
        NumberDataPoint(attributes={"cpu": "0"}, time_unix_nano=T0, value=2.5),
        NumberDataPoint(attributes={"cpu": "1", PROCESS_PID: 7}, time_unix_nano=T0, value=3),
    )
    rm = ResourceMetrics(
        resource={PROCESS_PID: 4242, "host.name": "h"}, metrics=(_gauge("m", *points),)
    )
    request = encode((rm,))
    dps = request.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points
    assert [_attr_list(dp.attributes) for dp in dps] == [
        [(PROCESS_PID, 4242)],
        [("cpu", "0"), (PROCESS_PID, 4242)],
        [("cpu", "1"), (PROCESS_PID, 7)],
    ]
    assert _attr_list(request.resource_metrics[0].resource.attributes) == [
        (PROCESS_PID, 4242),
        ("host.name", "h"),
    ]


def test_every_closing_point_of_a_process_resource_carries_the_pid_once() -> None:
    points = (
        NumberDataPoint(attributes={"cpu": "0"}, time_unix_nano=T0, value=2.5),
        NumberDataPoint(attributes={"cpu": "1", PROCESS_PID: 7}, time_unix_nano=T0, value=3),
        NumberDataPoint(attributes={}, time_unix_nano=T0, value=1),
    )
    rm = ResourceMetrics(resource={PROCESS_PID: 4242}, metrics=(_gauge("m", *points),))
    request = ExportMetricsServiceRequest.FromString(encode_closing_bytes((rm,)))
    dps = request.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points
    assert [_attr_list(dp.attributes) for dp in dps] == [
        [("cpu", "0"), (PROCESS_PID, 4242)],
        [("cpu", "1"), (PROCESS_PID, 7)],
        [(PROCESS_PID, 4242)],
    ]


def test_points_values_types_and_times() -> None:
    request = encode((ResourceMetrics(resource=gpu_resource(0), metrics=gpu_metrics()),))
    gauge, energy, memory = request.resource_metrics[0].scope_metrics[0].metrics
    assert [(p.as_double, _attrs(p.attributes)) for p in gauge.gauge.data_points] == [
        (0.75, {"hw.gpu.task": "general"}),
        (0.0, {"hw.gpu.task": "encoder"}),
    ]
    assert all(p.WhichOneof("value") == "as_double" for p in gauge.gauge.data_points)
    assert gauge.gauge.data_points[0].start_time_unix_nano == 0
    assert energy.sum.is_monotonic and energy.sum.aggregation_temporality == CUMULATIVE
    (e,) = energy.sum.data_points
    assert (e.WhichOneof("value"), e.as_int) == ("as_int", 123456789)
    assert (e.start_time_unix_nano, e.time_unix_nano) == (START, T0)
    assert not memory.sum.is_monotonic and memory.sum.aggregation_temporality == CUMULATIVE
    (m,) = memory.sum.data_points
    assert m.as_int == 42 * 2**30
    assert _attrs(m.attributes) == {"hw.gpu.memory.state": "used", "nvidia.mig": False}


def test_identical_attribute_sets_share_one_encoding_without_mixing_types() -> None:
    # True == 1 == 1.0 in Python: a cache keyed on values alone would send the wrong type.
    points = tuple(
        NumberDataPoint(attributes={"k": v}, time_unix_nano=T0, value=1)
        for v in (True, 1, 1.0, "1")
    )
    shared = {"k": "same"}
    points += (
        NumberDataPoint(attributes=shared, time_unix_nano=T0, value=2),
        NumberDataPoint(attributes=shared, time_unix_nano=T0, value=3),
    )
    metric = Metric(name="m", unit="", description="", kind=MetricKind.GAUGE, points=points)
    request = encode((ResourceMetrics(resource={}, metrics=(metric,)),))
    dps = request.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points
    kinds = [dp.attributes[0].value.WhichOneof("value") for dp in dps]
    assert kinds == [
        "bool_value",
        "int_value",
        "double_value",
        "string_value",
        "string_value",
        "string_value",
    ]
    assert [_attrs(dp.attributes) for dp in dps[4:]] == [{"k": "same"}, {"k": "same"}]


def test_the_descriptor_cache_stays_bounded_and_encoding_stays_correct_after_the_trim() -> None:
    limit = 4
    cache = AttributeCache(limit=limit)
    point = NumberDataPoint(attributes={"k": "v"}, time_unix_nano=T0, value=1)
    for batch in range(10):
        metrics = tuple(_gauge(f"m{batch}.{i}", point) for i in range(limit + 2))
        encode_bytes((ResourceMetrics(resource={}, metrics=metrics),), cache)
    cache.begin_batch()
    # `_descriptors` is AttributeCache's private (name, description, unit) → bytes cache.
    assert len(cache._descriptors) <= limit

    metrics = (_gauge("m0.0", point), _gauge("fresh", point))
    batch_after = (ResourceMetrics(resource={}, metrics=metrics),)
    body = encode_bytes(batch_after, cache)
    assert body == encode_bytes(batch_after)
    decoded = ExportMetricsServiceRequest.FromString(body)
    described = [
        (m.name, m.description, m.unit, _attr_list(m.gauge.data_points[0].attributes))
        for m in decoded.resource_metrics[0].scope_metrics[0].metrics
    ]
    assert described == [
        ("m0.0", "m0.0 d", "1", [("k", "v")]),
        ("fresh", "fresh d", "1", [("k", "v")]),
    ]


def test_the_attribute_cache_turns_its_generation_past_its_limit() -> None:
    """Pods come and go: encoded attribute sets past `limit` become the old generation, and a
    set not seen again is gone at the next turn, so the cache never holds every set ever seen."""
    limit = 4
    cache = AttributeCache(limit=limit)
    for batch in range(10):
        points = tuple(
            NumberDataPoint(attributes={"pod": f"p{batch}.{i}"}, time_unix_nano=T0, value=1)
            for i in range(limit + 2)
        )
        encode_bytes((ResourceMetrics(resource={}, metrics=(_gauge("m", *points),)),), cache)
    cache.begin_batch()  # as the next batch's encode does
    # `_by_content` and `_older` are AttributeCache's private generations (content → bytes).
    assert len(cache._by_content) + len(cache._older) <= 2 * (limit + 2)
    again = NumberDataPoint(attributes={"pod": "p0.0"}, time_unix_nano=T0, value=1)
    batch_after = (ResourceMetrics(resource={}, metrics=(_gauge("m", again),)),)
    assert encode_bytes(batch_after, cache) == encode_bytes(batch_after)  # re-encoded, the same


def test_a_resources_pid_on_its_points_keeps_its_type_across_batches() -> None:
    # The pid's point field is cached per pid: keyed on the value alone, a process whose pid
    # came as `True` after one whose pid was `1` would be sent as an int.
    cache = AttributeCache()
    kinds = []
    for pid in (1, True, 1.0, "1", 1):
        point = NumberDataPoint(attributes={"k": "v"}, time_unix_nano=T0, value=1)
        metric = Metric(name="m", unit="", description="", kind=MetricKind.GAUGE, points=(point,))
        rm = ResourceMetrics(resource={PROCESS_PID: pid}, metrics=(metric,))
        request = ExportMetricsServiceRequest.FromString(encode_bytes((rm,), cache))
        (dp,) = request.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points
        assert _attrs(dp.attributes) == {"k": "v", PROCESS_PID: pid}
        kinds.append(dp.attributes[1].value.WhichOneof("value"))
    assert kinds == ["int_value", "bool_value", "double_value", "string_value", "int_value"]


def test_values_out_of_the_wire_range_do_not_fail_the_batch() -> None:
    metric = Metric(
        name="big",
        unit="",
        description="",
        kind=MetricKind.SUM,
        monotonic=True,
        points=(NumberDataPoint(attributes={"huge": 2**70}, time_unix_nano=T0, value=2**65),),
    )
    request = encode((ResourceMetrics(resource={"odd": None}, metrics=(metric,)),))  # type: ignore[dict-item]
    (dp,) = request.resource_metrics[0].scope_metrics[0].metrics[0].sum.data_points
    assert dp.as_double == float(2**65)
    assert _attrs(dp.attributes) == {"huge": str(2**70)}
    assert _attrs(request.resource_metrics[0].resource.attributes) == {"odd": "None"}
    assert any_value(-(2**63)).int_value == -(2**63)


def test_a_metric_without_points_keeps_its_type() -> None:
    metric = Metric(name="empty", unit="", description="", kind=MetricKind.GAUGE, points=())
    request = encode((ResourceMetrics(resource={}, metrics=(metric,)),))
    assert request.resource_metrics[0].scope_metrics[0].metrics[0].WhichOneof("data") == "gauge"


def test_bytes_round_trip_and_one_resource_per_model_resource() -> None:
    batch = tuple(
        ResourceMetrics(resource=gpu_resource(i), metrics=gpu_metrics()) for i in range(4)
    )
    body = encode_bytes(batch)
    parsed = ExportMetricsServiceRequest.FromString(body)
    assert parsed == encode(batch)
    assert [_attrs(rm.resource.attributes)["hw.name"] for rm in parsed.resource_metrics] == [
        "nvidia0",
        "nvidia1",
        "nvidia2",
        "nvidia3",
    ]
    assert encode(()).SerializeToString() == b""
