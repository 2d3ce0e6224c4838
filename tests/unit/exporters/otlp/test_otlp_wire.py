"""The hand-written wire encoder gives exactly the bytes of the opentelemetry-proto messages."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes
from otelgpu.exporters.otlp.ended.trail import Trail
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.unit.exporters.otlp.batches import START, T0, gpu_metrics, gpu_resource
from tests.unit.exporters.otlp.reference_encode import reference_request

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_attr_value = st.one_of(
    _text,
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
)
_attributes = st.dictionaries(_text, _attr_value, max_size=6)
_times = st.one_of(st.just(0), st.just(T0), st.integers(0, 2**64 - 1))
_value = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.just(-0.0),
)
_point = st.builds(
    NumberDataPoint,
    attributes=_attributes,
    time_unix_nano=_times,
    value=_value,
    start_time_unix_nano=_times,
)
_metric = st.builds(
    Metric,
    name=_text,
    unit=_text,
    description=st.one_of(_text, st.text(min_size=130, max_size=300)),
    kind=st.sampled_from(MetricKind),
    points=st.lists(_point, max_size=5).map(tuple),
    monotonic=st.booleans(),
)
_resource = st.builds(
    ResourceMetrics,
    resource=_attributes,
    metrics=st.lists(_metric, max_size=4).map(tuple),
    scope=_text,
    scope_version=_text,
    schema_url=st.one_of(st.just(""), st.just("https://opentelemetry.io/schemas/1.44.0"), _text),
)


def _same(batch: Batch, cache: AttributeCache | None = None) -> None:
    expected = reference_request(batch).SerializeToString()
    assert encode_bytes(batch, cache) == expected
    # written down for the ended-series memory as it goes, the same bytes
    assert encode_bytes(batch, cache, Trail()) == expected


@settings(max_examples=150, deadline=None)
@given(st.lists(_resource, max_size=4).map(tuple))
def test_random_batches_encode_to_the_message_bytes(batch: Batch) -> None:
    _same(batch)


def test_gpu_batches_with_shared_and_reused_attribute_sets() -> None:
    cache = AttributeCache()
    shared = {"hw.gpu.task": "general"}
    # the int64 bounds, and past them
    values = (
        0.5,
        1,
        -1,
        0,
        0.0,
        -0.0,
        math.inf,
        math.nan,
        2**63 - 1,
        -(2**63),
        2**63,
        -(2**63) - 1,
    )
    for cycle in range(3):  # the cache carries encodings across batches
        points = tuple(
            NumberDataPoint(attributes=shared, time_unix_nano=T0 + cycle, value=v) for v in values
        )
        metric = Metric(name="m", unit="1", description="d", kind=MetricKind.GAUGE, points=points)
        batch = (
            *(ResourceMetrics(resource=gpu_resource(i), metrics=gpu_metrics()) for i in range(5)),
            ResourceMetrics(resource=gpu_resource(9, big=2**64, on=True), metrics=(metric,)),
            ResourceMetrics(resource={}, metrics=(), scope="", scope_version="1"),
        )
        _same(batch, cache)


def test_long_fields_need_multi_byte_lengths() -> None:
    long = "x" * 70_000
    point = NumberDataPoint(
        attributes={long: long}, time_unix_nano=T0, value=1, start_time_unix_nano=START
    )
    metric = Metric(
        name=long, unit="", description="", kind=MetricKind.SUM, monotonic=True, points=(point,)
    )
    _same((ResourceMetrics(resource={"k": long}, metrics=(metric,) * 3),))


def test_point_lengths_at_the_table_and_varint_boundaries() -> None:
    """Points of every size around one-byte varints (128) and the looked-up lengths (1024)."""
    for size in range(100, 1100):
        point = NumberDataPoint(attributes={"k": "x" * size}, time_unix_nano=T0, value=1.5)
        metric = Metric(name="m", unit="", description="", kind=MetricKind.GAUGE, points=(point,))
        _same((ResourceMetrics(resource={}, metrics=(metric,)),))


def test_lengths_at_the_varint_byte_boundaries() -> None:
    for size in (125, 126, 127, 128, 129, 16381, 16382, 16383, 16384, 16385, 2**21):
        metric = Metric(name="m" * size, unit="", description="", kind=MetricKind.GAUGE, points=())
        _same((ResourceMetrics(resource={"k": "v" * size}, metrics=(metric,)),))


def test_the_schema_url_is_on_the_resource_and_the_scope() -> None:
    url = "https://opentelemetry.io/schemas/1.44.0"
    batch = (ResourceMetrics(resource={"hw.id": "GPU-0"}, metrics=(), schema_url=url),)
    _same(batch)
    request = reference_request(batch)
    request.ParseFromString(encode_bytes(batch))
    assert request.resource_metrics[0].schema_url == url
    assert request.resource_metrics[0].scope_metrics[0].schema_url == url
