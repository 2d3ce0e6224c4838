"""The general path's two promises that no other test held: a metric reported with no points
empties its series for that resource, and a name already taken by a family of another type
stores nothing in it."""

from __future__ import annotations

from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Metric, MetricKind, ResourceMetrics
from tests.unit.exporters.prometheus.batches import counter, gauge, gpu
from tests.unit.exporters.prometheus.translators import make_translator


def _body(store: SeriesStore) -> list[str]:
    text, _ = render_text(store.families.values())
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_a_metric_reported_with_no_points_takes_its_old_lines_away() -> None:
    store, translate = SeriesStore(), make_translator("otel")
    resource = gpu(0)
    two = gauge("acme.queue.depth", "1", 3.0, {"queue": "a"})
    translate.ingest(store, (ResourceMetrics(resource=resource, metrics=(two,)),), now=1.0)
    assert [line for line in _body(store) if line.startswith("acme_queue_depth")]
    empty = Metric(
        name="acme.queue.depth", unit="1", description="", kind=MetricKind.GAUGE, points=()
    )
    translate.ingest(store, (ResourceMetrics(resource=resource, metrics=(empty,)),), now=2.0)
    assert not [line for line in _body(store) if line.startswith("acme_queue_depth")]


def test_a_name_held_by_a_family_of_another_type_stores_nothing_in_it() -> None:
    store, translate = SeriesStore(), make_translator("otel")
    first = gauge("acme.jobs.total", "", 3.0)  # a gauge whose name is `acme_jobs_total`
    translate.ingest(store, (ResourceMetrics(resource=gpu(0), metrics=(first,)),), now=1.0)
    clash = counter("acme.jobs", "1", ({}, 7.0))  # `acme_jobs_total` again, as a counter
    translate.ingest(
        store, (ResourceMetrics(resource=gpu(0), metrics=(first,)),
                ResourceMetrics(resource=gpu(1), metrics=(clash,))), now=2.0,
    )  # fmt: skip
    lines = [line for line in _body(store) if line.startswith("acme_jobs")]
    assert len(lines) == 1 and lines[0].endswith(" 3.0"), lines


def test_the_agents_own_metrics_get_no_info_series() -> None:
    """Self-telemetry goes through the general path too, and is no device: no `hw_gpu_info`."""
    own = ResourceMetrics(resource={}, metrics=(gauge("otelgpu.source.up", "", 1.0),))
    families = make_translator("otel", const_labels={"cluster": "a"}).families(own, now=1.0)
    assert [family.name for family in families] == ["otelgpu_source_up"]
