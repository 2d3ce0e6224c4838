"""The exporter's AttributeCache stays small per cached attribute (P3: thousands of sets at 10k
series, kept across batches)."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes, encode_closing_bytes
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.unit.exporters.otlp.test_otlp_wire import _same

SETS, ATTRIBUTES = 500, 20


def _attribute_sets() -> list[dict[str, object]]:
    return [
        {f"k8s.attr.{i}": f"value-{r}-{i}-of-some-length" for i in range(ATTRIBUTES)}
        for r in range(SETS)
    ]


def test_a_cached_attribute_costs_less_than_90_bytes_beyond_its_strings() -> None:
    # Key and value strings belong to the batch; what the cache adds is its key, the encoded
    # bytes and its dict slot. A key made of one (key, value) tuple per attribute cost ~120 B
    # per attribute; a flat key ~70.
    sets = _attribute_sets()
    cache = AttributeCache()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for attributes in sets:
            cache.resource(attributes)
        cache.begin_batch()  # forgets this batch's identities: only the content entries stay
        added = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    per_attribute = added / (SETS * ATTRIBUTES)
    assert per_attribute < 90, f"{per_attribute:.0f} B per cached attribute"


def _one_point(resource: dict[str, Any], point: dict[str, Any]) -> Batch:
    """A batch of one resource with one gauge of one point."""
    metric = Metric(
        name="m",
        unit="1",
        description="",
        kind=MetricKind.GAUGE,
        points=(NumberDataPoint(value=1, time_unix_nano=5, attributes=point),),
    )
    return (ResourceMetrics(resource=resource, metrics=(metric,)),)


def test_the_flat_key_keeps_types_and_positions_apart() -> None:
    # True == 1 == 1.0 and equal flattened pairs must not share an encoding.
    cache = AttributeCache()
    lookalikes: list[dict[str, object]] = [
        {"a": 1},
        {"a": True},
        {"a": 1.0},
        {"a": "1"},
        {"a": "b", "c": "d"},
        {"a": "c", "b": "d"},
        {"c": "d", "a": "b"},
    ]
    for attributes in lookalikes + lookalikes:  # the second round hits the cache
        _same(_one_point(attributes, dict(attributes)), cache)


@pytest.mark.parametrize("write", [encode_bytes, encode_closing_bytes])
def test_an_encoded_batch_is_not_kept_alive_by_the_cache(
    write: Callable[[Batch, AttributeCache], bytes],
) -> None:
    # The identity lookups hold each attribute mapping while a batch (or its closing points) is
    # encoded; afterwards they must let go, or the previous batch lives on until the next one.
    resource: dict[str, object] = {"host.name": "n1"}
    point: dict[str, object] = {"gpu": "0"}
    batch = _one_point(resource, point)
    before = sys.getrefcount(resource), sys.getrefcount(point)
    cache = AttributeCache()
    write(batch, cache)
    after = sys.getrefcount(resource), sys.getrefcount(point)  # outside `assert` (pytest's rewrite)
    assert after == before
