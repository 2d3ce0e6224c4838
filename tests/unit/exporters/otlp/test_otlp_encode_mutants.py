"""The encoder: a process's pid on each point, and the bounds on its caches of metric descriptors
and attribute sets."""

from __future__ import annotations

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otelgpu.exporters.otlp.encode import AttributeCache, encode, encode_bytes
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.pdata.semconv import PROCESS_PID

T0 = 1_700_000_000_000_000_000


def _attrs(kvs: object) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for kv in kvs:  # type: ignore[attr-defined]
        out.append((kv.key, getattr(kv.value, kv.value.WhichOneof("value"))))
    return out


def _gauge(name: str, *points: NumberDataPoint) -> Metric:
    return Metric(
        name=name, unit="1", description=f"{name} d", kind=MetricKind.GAUGE, points=points
    )


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
    assert [_attrs(dp.attributes) for dp in dps] == [
        [(PROCESS_PID, 4242)],
        [("cpu", "0"), (PROCESS_PID, 4242)],
        [("cpu", "1"), (PROCESS_PID, 7)],
    ]
    assert _attrs(request.resource_metrics[0].resource.attributes) == [
        (PROCESS_PID, 4242),
        ("host.name", "h"),
    ]


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
        (m.name, m.description, m.unit, _attrs(m.gauge.data_points[0].attributes))
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
        cache.begin_batch()
        encode_bytes((ResourceMetrics(resource={}, metrics=(_gauge("m", *points),)),), cache)
    cache.begin_batch()
    # `_by_content` and `_older` are AttributeCache's private generations (content → bytes).
    assert len(cache._by_content) + len(cache._older) <= 2 * (limit + 2)
    again = NumberDataPoint(attributes={"pod": "p0.0"}, time_unix_nano=T0, value=1)
    batch_after = (ResourceMetrics(resource={}, metrics=(_gauge("m", again),)),)
    assert encode_bytes(batch_after, cache) == encode_bytes(batch_after)  # re-encoded, the same
