"""The model's helpers that build a resource from another carry every field they do not change."""

from __future__ import annotations

from dataclasses import fields

from otelgpu.pdata.model import (
    Metric,
    MetricKind,
    NumberDataPoint,
    ResourceMetrics,
    keep_metrics,
    with_resource,
)


def _metric(name: str) -> Metric:
    point = NumberDataPoint(attributes={}, time_unix_nano=1, value=1.0)
    return Metric(name=name, unit="1", description="", kind=MetricKind.GAUGE, points=(point,))


def _every_field_set() -> ResourceMetrics:
    """A resource whose every field holds a value unlike its default."""
    rm = ResourceMetrics(
        resource={"hw.id": "GPU-0"},
        metrics=(_metric("a"), _metric("b")),
        scope="a-scope",
        scope_version="9.9",
        identity=("gpu", "GPU-0"),
        notes={"note": 1},
        schema_url="https://example.invalid/schema",
    )
    defaults = ResourceMetrics(resource={}, metrics=())
    for field in fields(ResourceMetrics):
        assert getattr(rm, field.name) != getattr(defaults, field.name), field.name
    return rm


def _others(rm: ResourceMetrics, *changed: str) -> dict[str, object]:
    return {f.name: getattr(rm, f.name) for f in fields(ResourceMetrics) if f.name not in changed}


def test_with_resource_changes_only_the_resource() -> None:
    rm = _every_field_set()
    out = with_resource(rm, {"k8s.pod.name": "p"})
    assert out.resource == {"hw.id": "GPU-0", "k8s.pod.name": "p"}
    assert _others(out, "resource") == _others(rm, "resource")


def test_with_resource_keeps_existing_keys_unless_told_to_override() -> None:
    rm = _every_field_set()
    assert with_resource(rm, {"hw.id": "other"}).resource == {"hw.id": "GPU-0"}
    assert with_resource(rm, {"hw.id": "other"}, override=True).resource == {"hw.id": "other"}


def test_with_resource_of_nothing_is_the_same_object() -> None:
    rm = _every_field_set()
    assert with_resource(rm, {}) is rm


def test_keep_metrics_changes_only_the_metrics() -> None:
    rm = _every_field_set()
    out = keep_metrics(rm, (m for m in rm.metrics if m.name == "b"))
    assert [m.name for m in out.metrics] == ["b"]
    assert isinstance(out.metrics, tuple)
    assert _others(out, "metrics") == _others(rm, "metrics")
