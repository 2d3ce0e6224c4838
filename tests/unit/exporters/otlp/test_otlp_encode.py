"""The encoder: the internal model maps 1:1 onto opentelemetry-proto messages."""

from __future__ import annotations

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from otelgpu.exporters.otlp import encode
from otelgpu.exporters.otlp.encode import AttributeCache, any_value, encode_bytes
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
