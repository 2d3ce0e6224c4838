"""What `Translator.ingest` reports and writes (translate.py): the (stored, dropped) counts on the
general path and on a replay, a metric reported with no point a number, a name another type's family
holds, an identity that says it has no series, the per-holder copies' info series, the agent's
own metrics (no info series), and replay by default."""

from __future__ import annotations

import pytest

from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import PLAN_SWEEP, Translator
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.receivers.nvml.dcgm_names import NAMING
from tests.unit.exporters.prometheus.batches import counter, gauge, gpu, held_by
from tests.unit.exporters.prometheus.translators import make_translator


def point(value: object, attributes: dict[str, AttrValue] | None = None) -> NumberDataPoint:
    return NumberDataPoint(attributes=attributes or {}, time_unix_nano=1, value=value)  # type: ignore[arg-type]


def utilization(*values: object) -> Metric:
    """dcgm splits it by task: a replay hands it to the general path every time."""
    tasks = ("general", "encoder", "decoder")
    points = tuple(point(v, {"hw.gpu.task": t}) for v, t in zip(values, tasks, strict=False))
    return Metric(
        name="hw.gpu.utilization", unit="1", description="d", kind=MetricKind.GAUGE, points=points
    )


def lines(store: SeriesStore) -> list[str]:
    text = render_text(store.families.values())[0]
    return [line for line in text.splitlines() if not line.startswith("#")]


def count_general(translator: Translator) -> list[int]:
    """Counts the translator's general-path calls (one per resource written that way)."""
    calls: list[int] = []
    write = translator._general.write_resource

    def counted(*args: object, **kwargs: object) -> tuple[int, int, bool]:
        calls.append(1)
        return write(*args, **kwargs)  # type: ignore[arg-type]

    translator._general.write_resource = counted  # type: ignore[method-assign]
    return calls


def test_ingest_counts_points_stored_and_dropped_on_the_general_path_and_on_replay() -> None:
    store, translator = SeriesStore(), make_translator("dcgm")
    metrics = (gauge("hw.power", "W", 300.0), utilization(0.5, "n/a", 0.25))
    resource = ResourceMetrics(resource=gpu(0), metrics=metrics, identity="g")
    calls = count_general(translator)
    for now in (1.0, 2.0, 3.0):  # the general path, then replays
        assert translator.ingest(store, (resource,), now) == (3, 1)
    assert len(calls) == 1  # replayed after the first batch


def test_a_resource_that_is_no_device_is_counted_too() -> None:
    store, translator = SeriesStore(), make_translator("otel")
    power = gauge("hw.power", "W", 300.0)
    bad = Metric(
        name="hw.energy", unit="J", description="d", kind=MetricKind.GAUGE, points=(point(None),)
    )
    rm = ResourceMetrics(resource={"service.name": "x"}, metrics=(power, bad))
    assert translator.ingest(store, (rm,), 1.0) == (1, 1)
    assert translator.ingest(store, (rm,), 2.0) == (1, 1)


@pytest.mark.parametrize(
    "points",
    [(), (point("n/a", {"queue": "a"}),)],
    ids=["no points", "no point a number"],
)
def test_a_metric_reported_without_a_number_takes_its_old_lines_away(
    points: tuple[NumberDataPoint, ...],
) -> None:
    store, translate = SeriesStore(), make_translator("otel")
    resource = gpu(0)
    read = gauge("acme.queue.depth", "1", 3.0, {"queue": "a"})
    translate.ingest(store, (ResourceMetrics(resource=resource, metrics=(read,)),), now=1.0)
    assert [line for line in lines(store) if line.startswith("acme_queue_depth")]
    unread = Metric(
        name="acme.queue.depth", unit="1", description="", kind=MetricKind.GAUGE, points=points
    )
    translate.ingest(store, (ResourceMetrics(resource=resource, metrics=(unread,)),), now=2.0)
    assert not [line for line in lines(store) if line.startswith("acme_queue_depth")]


def test_a_name_held_by_a_family_of_another_type_stores_nothing_in_it() -> None:
    store, translate = SeriesStore(), make_translator("otel")
    first = gauge("acme.jobs.total", "", 3.0)  # a gauge whose name is `acme_jobs_total`
    translate.ingest(store, (ResourceMetrics(resource=gpu(0), metrics=(first,)),), now=1.0)
    clash = counter("acme.jobs", "1", ({}, 7.0))  # `acme_jobs_total` again, as a counter
    translate.ingest(
        store, (ResourceMetrics(resource=gpu(0), metrics=(first,)),
                ResourceMetrics(resource=gpu(1), metrics=(clash,))), now=2.0,
    )  # fmt: skip
    jobs = [line for line in lines(store) if line.startswith("acme_jobs")]
    assert len(jobs) == 1 and jobs[0].endswith(" 3.0"), jobs


def test_a_resource_with_a_point_of_a_clashing_name_is_counted_alike_in_every_batch() -> None:
    """Its point is dropped, and the resource is never replayed (a replay writes every
    point it planned): each batch goes the general way and counts the same."""
    store, translate = SeriesStore(), make_translator("otel")
    first = gauge("acme.jobs.total", "", 3.0)
    translate.ingest(store, (ResourceMetrics(resource=gpu(0), metrics=(first,)),), now=1.0)
    clash = counter("acme.jobs", "1", ({}, 7.0))
    power = gauge("hw.power", "W", 300.0)
    resource = ResourceMetrics(resource=gpu(1), metrics=(clash, power), identity="g1")
    calls = count_general(translate)
    for now in (2.0, 3.0, 4.0):
        assert translate.ingest(store, (resource,), now) == (1, 1)
    assert len(calls) == 3


def test_an_identity_reported_without_metrics_loses_its_lines_at_once() -> None:
    store, translator = SeriesStore(), make_translator("otel")
    gpu0, gpu1 = gpu(0), gpu(1)

    def device(resource: dict[str, AttrValue], *metrics: Metric) -> ResourceMetrics:
        return ResourceMetrics(resource=resource, metrics=metrics, identity=resource[semconv.HW_ID])

    power = gauge("hw.power", "W", 300.0)
    translator.ingest(store, (device(gpu0, power), device(gpu1, power)), 1.0)
    assert translator.ingest(store, (device(gpu0), device(gpu1, power)), 2.0) == (1, 0)
    assert [line for line in lines(store) if "nvidia0" in line] == []
    assert len([line for line in lines(store) if "nvidia1" in line]) == 2  # power and info


def test_per_holder_copies_write_the_shared_gpu_s_info_series() -> None:
    store, translator = SeriesStore(), make_translator("dcgm", shared_gpu_series="per_holder")
    shared = {semconv.GPU_SHARED: True, semconv.GPU_HOLDERS: 2}
    device = gpu(0, **shared)
    batch = [
        ResourceMetrics(
            resource=device,
            metrics=(gauge("hw.power", "W", 400.0),),
            identity=device[semconv.HW_ID],
        )
    ]
    for pod, replica in (("a", "0"), ("b", "1")):
        holder = gpu(0, **held_by(pod), **shared, **{semconv.GPU_REPLICA: replica})
        allocation = gauge(semconv.GPU_ALLOCATION, "1", 0.5)
        batch.append(ResourceMetrics(resource=holder, metrics=(allocation,), identity=("a", pod)))
    assert translator.ingest(store, tuple(batch), 1.0) == (4, 0)
    info = [line for line in lines(store) if line.startswith("hw_gpu_info{")]
    assert len(info) == 1 and 'UUID="GPU-00000000' in info[0]


def test_a_translator_replays_unless_told_not_to() -> None:
    resource = ResourceMetrics(
        resource=gpu(0), metrics=(gauge("hw.power", "W", 300.0),), identity="g"
    )
    for translator, general_calls in (
        (Translator("otel", {}, names=NAMING), 1),
        (Translator("otel", {}, names=NAMING, replay=False), 3),
    ):
        store, calls = SeriesStore(), count_general(translator)
        for now in (1.0, 2.0, 3.0):
            translator.ingest(store, (resource,), now)
        assert len(calls) == general_calls


def test_the_target_of_a_point_is_its_split_field_or_the_metric_s() -> None:
    translator = make_translator("dcgm")
    util = utilization(0.5, 0.25)
    assert translator.target(util, {"hw.gpu.task": "encoder"}).name == "DCGM_FI_DEV_ENC_UTIL"
    assert translator.target(util, {"hw.gpu.task": "general"}).name == "DCGM_FI_DEV_GPU_UTIL"
    power = gauge("hw.power", "W", 300.0)
    assert translator.target(power, {}).name == "DCGM_FI_DEV_POWER_USAGE"


def test_a_steady_resource_keeps_its_plan_through_sweeps() -> None:
    store, translator = SeriesStore(), make_translator("otel")
    resource = ResourceMetrics(
        resource=gpu(0), metrics=(gauge("hw.power", "W", 300.0),), identity="g"
    )
    calls = count_general(translator)
    for now in range(3 * PLAN_SWEEP + 2):
        assert translator.ingest(store, (resource,), float(now)) == (1, 0)
    assert len(calls) == 1


def test_the_agents_own_metrics_get_no_info_series() -> None:
    """Self-telemetry goes through the general path too, and is no device: no `hw_gpu_info`."""
    own = ResourceMetrics(resource={}, metrics=(gauge("otelgpu.source.up", "", 1.0),))
    families = make_translator("otel", const_labels={"cluster": "a"}).families(own, now=1.0)
    assert [family.name for family in families] == ["otelgpu_source_up"]


def test_self_telemetry_families_carry_the_points_labels_only() -> None:
    translator = make_translator("otel", const_labels={"node": "n1"})
    rm = ResourceMetrics(
        resource=gpu(0),
        metrics=(gauge("otelcol.exporter.sent", "1", 5.0, {"exporter": "prometheus"}),),
    )
    (family,) = translator.families(rm, 1.0)
    assert dict(family.lines()) == {
        'otelcol_exporter_sent_ratio{exporter="prometheus",node="n1"} ': "5.0\n"
    }
