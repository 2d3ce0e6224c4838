"""Replaying a resource's plan (replay.py) writes exactly what the general path writes.

The property: any sequence of batches (resources coming, going, sharing identities, changing
labels, shapes, values that are not numbers, expiry and cache rotations in between), ingested by
a translator that replays and by one that never does, leaves the same series, owners, update
stamps and body, and the same (stored, dropped) counts.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelgpu.exporters.prometheus.general import GeneralPath
from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import Family, SeriesStore
from otelgpu.exporters.prometheus.translate import PLAN_SWEEP
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.unit.exporters.prometheus.batches import gauge, gpu, held_by
from tests.unit.exporters.prometheus.translators import make_translator

TASKS = ({"hw.gpu.task": "general"}, {"hw.gpu.task": "encoder"}, {"hw.gpu.task": "decoder"})
SHARED_TASK = TASKS[0]  # one dict object reused batch after batch, as the receiver does
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0.0, 0.5, True, "n/a", None]),
)


@st.composite
def metrics(draw: st.DrawFn) -> tuple[Metric, ...]:
    """A GPU's metrics: a few shapes, sometimes with bad values or a changed descriptor."""
    chosen = draw(st.lists(st.sampled_from(range(7)), min_size=1, max_size=5, unique=True))
    out = []
    for which in chosen:
        if which == 0:  # dcgm splits this one by task; several points
            tasks = draw(st.lists(st.sampled_from(range(3)), min_size=1, max_size=3, unique=True))
            points = tuple(_point(TASKS[t], draw(VALUES)) for t in tasks)
            out.append(_metric("hw.gpu.utilization", "1", MetricKind.GAUGE, points))
        elif which == 1:
            attributes = SHARED_TASK if draw(st.booleans()) else dict(SHARED_TASK)
            out.append(
                _metric("hw.power", "W", MetricKind.GAUGE, (_point(attributes, draw(VALUES)),))
            )
        elif which == 2:  # a counter; its unit sometimes changes (a new family name)
            unit = draw(st.sampled_from(["J", "mJ"]))
            out.append(
                _metric("hw.energy", unit, MetricKind.SUM, (_point({}, draw(VALUES)),), True)
            )
        elif which == 3:  # the same name as a gauge and as a counter: type conflicts
            kind = draw(st.sampled_from([MetricKind.GAUGE, MetricKind.SUM]))
            out.append(
                _metric("x.y", "1", kind, (_point({}, draw(VALUES)),), kind is MetricKind.SUM)
            )
        elif which == 4:  # two points that render to one line (the later wins)
            points = (_point({"a": "1"}, draw(VALUES)), _point({"a": 1}, draw(VALUES)))
            out.append(_metric("dup.points", "1", MetricKind.GAUGE, points))
        elif which == 6:  # dcgm naming scales it (bytes to MiB) and makes it an integer
            points = (_point({}, draw(VALUES)),)
            out.append(_metric("hw.gpu.memory.usage", "By", MetricKind.GAUGE, points))
        else:
            points = (_point({}, draw(VALUES)),)
            out.append(
                _metric(
                    f"hw.temperature.{draw(st.integers(0, 1))}", "Cel", MetricKind.GAUGE, points
                )
            )
    return tuple(out)


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[ResourceMetrics, ...]]:
    """Batches over a small pool: GPUs whose holder changes, shared identities (allocation
    series of a shared GPU, one resource per holder), resources without identity."""
    count = draw(st.integers(1, 6))
    out = []
    for _ in range(count):
        resources = []
        for slot in draw(st.lists(st.integers(0, 5), max_size=6)):
            labels: dict[str, AttrValue] = dict(held_by(draw(st.sampled_from(["a", "b", "c"]))))
            resource = gpu(slot % 3, **labels)
            identity: object = draw(
                st.sampled_from([resource[semconv.HW_ID], ("alloc", slot % 2), None])
            )
            resources.append(
                ResourceMetrics(resource=resource, metrics=draw(metrics()), identity=identity)
            )
        out.append(tuple(resources))
    return out


def _point(attributes: dict[str, AttrValue], value: object) -> NumberDataPoint:
    return NumberDataPoint(attributes=attributes, time_unix_nano=1, value=value)  # type: ignore[arg-type]


def _metric(
    name: str, unit: str, kind: MetricKind, points: tuple[NumberDataPoint, ...], mono: bool = False
) -> Metric:
    return Metric(name=name, unit=unit, description="d", kind=kind, points=points, monotonic=mono)


def metric_lines(store: SeriesStore) -> list[str]:
    """The body's sample lines, the devices' info series (`hw_gpu_info`) aside."""
    text = render_text(store.families.values())[0]
    return [x for x in text.splitlines() if x[0] != "#" and not x.startswith("hw_gpu_info{")]


def state(store: SeriesStore) -> object:
    """What a store holds that anyone can observe: lines, owners, stamps, the set each identity
    owns (stale entries of `groups`, lines another identity took since, are bookkeeping)."""
    families = {}
    for name, family in store.families.items():
        lines = dict(family.lines())
        families[name] = (
            family.type,
            lines,
            {prefix: family.owner(prefix) for prefix in lines},
            {prefix: family.stamp(prefix) for prefix in lines},
            family.owned(),
        )
    return families, render_text(store.families.values()), store.replaced


def revalued(
    batch: tuple[ResourceMetrics, ...], data: st.DataObject
) -> tuple[ResourceMetrics, ...]:
    """The next cycle of `batch`: the same resources and shapes with new values (some not
    numbers), point attributes sometimes equal copies instead of the same dicts."""
    out = []
    for rm in batch:
        metrics = []
        for metric in rm.metrics:
            points = tuple(
                _point(
                    dict(p.attributes) if data.draw(st.booleans()) else p.attributes,  # type: ignore[arg-type]
                    data.draw(VALUES),
                )
                for p in metric.points
            )
            metrics.append(replace(metric, points=points))
        out.append(replace(rm, resource=dict(rm.resource), metrics=tuple(metrics)))
    return tuple(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=batches(), naming=st.sampled_from(["otel", "dcgm"]), data=st.data())
def test_replay_leaves_the_store_the_general_path_leaves(
    sequence: list[tuple[ResourceMetrics, ...]], naming: str, data: st.DataObject
) -> None:
    fast, general = SeriesStore(), SeriesStore()
    replaying = make_translator(naming, replay=True)
    plain = make_translator(naming, replay=False)
    now = 0.0
    for batch in sequence:
        for _ in range(data.draw(st.integers(1, 4))):  # its next cycles: replays
            now += 1.0
            assert replaying.ingest(fast, batch, now) == plain.ingest(general, batch, now)
            assert state(fast) == state(general)
            batch = revalued(batch, data)
        if data.draw(st.booleans()):
            assert fast.expire(now, 2.5) == general.expire(now, 2.5)
        if data.draw(st.booleans()):
            for translator, store in ((replaying, fast), (plain, general)):
                translator.labels.rotate()
                store.rotate()
        assert state(fast) == state(general)


def test_a_steady_node_is_replayed_and_its_values_move() -> None:
    """The fast path is really taken (no claims, no label rendering), and writes the new values."""
    store, translator = SeriesStore(), make_translator("otel")
    power = (_metric("hw.power", "W", MetricKind.GAUGE, (_point(SHARED_TASK, 1.0),)),)
    gpu0 = gpu(0)
    translator.ingest(store, (ResourceMetrics(resource=gpu0, metrics=power, identity="g"),), 1.0)
    losses = dict(store.ledger.losses)
    rendered = translator.labels.line_prefix
    translator.labels.line_prefix = None  # type: ignore[assignment,method-assign]  # a replay renders nothing
    moved = (_metric("hw.power", "W", MetricKind.GAUGE, (_point(SHARED_TASK, 2.5),)),)
    again = (ResourceMetrics(resource=dict(gpu0), metrics=moved, identity="g"),)
    assert translator.ingest(store, again, 2.0) == (1, 0)
    translator.labels.line_prefix = rendered  # type: ignore[method-assign]
    assert store.ledger.losses == losses  # nothing claimed, nothing removed
    (line,) = metric_lines(store)
    assert line.endswith(" 2.5")


def test_a_holder_leaving_a_shared_identity_leaves_at_once_when_the_other_replays() -> None:
    """Two resources share one identity; the next batch has one of them, replayed: the other's
    line must go at once (the set is replaced), as on the general path."""
    store, translator = SeriesStore(), make_translator("otel")
    share = _metric("nvidia.gpu.allocation", "1", MetricKind.GAUGE, (_point({}, 0.5),))

    def holder(pod: str) -> ResourceMetrics:
        return ResourceMetrics(resource=gpu(0, **held_by(pod)), metrics=(share,), identity="s")

    translator.ingest(store, (holder("a"), holder("b")), 1.0)
    translator.ingest(store, (holder("a"), holder("b")), 2.0)  # both replayed
    translator.ingest(store, (holder("a"),), 3.0)  # "a" replays; "b" left
    lines = metric_lines(store)
    assert len(lines) == 1 and 'k8s_pod_name="a"' in lines[0]


def test_a_device_leaving_a_shared_identity_takes_its_info_series_along() -> None:
    """Two devices report under one identity and both replay; then one is gone: its info
    series leaves at once with its other lines, though the other device replays."""
    store, translator = SeriesStore(), make_translator("otel")

    def device(index: int) -> ResourceMetrics:
        power = (gauge("hw.power", "W", 300.0 + index),)
        return ResourceMetrics(resource=gpu(index), metrics=power, identity="shared")

    for now in (1.0, 2.0):  # the general path, then both replayed
        translator.ingest(store, (device(0), device(1)), now)
    translator.ingest(store, (device(0),), 3.0)
    text = render_text(store.families.values())[0]
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(lines) == 2 and all('hw_name="nvidia0"' in line for line in lines)


def test_a_line_taken_over_and_given_back_is_claimed_again() -> None:
    """Identity `b` (other attributes, the same rendered labels) writes the line `a`'s plan
    holds, then stops: `a`'s next replay must claim it back, not write a line `b` still owns
    (`b`'s expiry or set replacement would then delete `a`'s series)."""
    store, translator = SeriesStore(), make_translator("otel")
    power = (_metric("hw.power", "W", MetricKind.GAUGE, (_point({}, 1.0),)),)
    a = ResourceMetrics(resource=gpu(0), metrics=power, identity="a")
    alike = {**gpu(0), semconv.GPU_INDEX: 0}  # the int 0 renders as "0", like a's "0"
    b = ResourceMetrics(resource=alike, metrics=power, identity="b")
    translator.ingest(store, (a,), 1.0)
    translator.ingest(store, (a,), 2.0)  # replayed
    translator.ingest(store, (b,), 3.0)  # b takes the line
    translator.ingest(store, (a,), 4.0)  # a writes it again: it must own it again
    family = store.families["hw_power_watts"]
    assert list(family.owned()) == [store.identities.key("a")]
    losses = dict(store.ledger.losses)
    translator.ingest(store, (a,), 5.0)  # owned again: a plain replay, nothing claimed
    assert store.ledger.losses == losses


def test_a_plan_whose_lines_are_all_still_owned_replays_after_a_loss_elsewhere() -> None:
    """Identity "s" loses the line of one of its two resources to another identity; the other
    resource's plan still owns every line: it replays (only the first takes the general path)."""
    store, translator = SeriesStore(), make_translator("otel")
    power = (gauge("hw.power", "W", 300.0),)
    first = ResourceMetrics(resource=gpu(0), metrics=power, identity="s")
    second = ResourceMetrics(resource=gpu(1), metrics=power, identity="s")
    alike = {**gpu(0), semconv.GPU_INDEX: 0}  # renders as `first` does
    for now in (1.0, 2.0):
        translator.ingest(store, (first, second), now)
    translator.ingest(store, (ResourceMetrics(resource=alike, metrics=power, identity="o"),), 3.0)
    written: list[object] = []
    general = translator._general.write_resource

    def spy(*args: object, **kwargs: object) -> tuple[int, int, bool]:
        written.append(args[2])
        return general(*args, **kwargs)  # type: ignore[arg-type]

    translator._general.write_resource = spy  # type: ignore[method-assign]
    translator.ingest(store, (first, second), 4.0)
    assert written == [tuple(first.resource.items())]


def test_plans_of_resources_gone_for_a_sweep_are_forgotten() -> None:
    """Pods that come and go do not grow the plans (nor what `Settle` remembers of them)."""
    store, translator = SeriesStore(), make_translator("otel")
    power = (_metric("hw.power", "W", MetricKind.GAUGE, (_point({}, 1.0),)),)
    steady = ResourceMetrics(resource=gpu(0), metrics=power, identity="steady")
    for n in range(8 * PLAN_SWEEP):  # a new pod every batch, each seen once
        gone = ResourceMetrics(resource=gpu(1, **held_by(f"p{n}")), metrics=power, identity=n)
        translator.ingest(store, (steady, gone), float(n))
    # A sweep every PLAN_SWEEP batches keeps the plans of the last PLAN_SWEEP batches.
    assert len(translator._plans) <= 2 * PLAN_SWEEP + 1
    assert len(translator._settle._last) <= 2 * PLAN_SWEEP + 1
    assert any(
        plan.identity == store.identities.key("steady") for plan in translator._plans.values()
    )


def test_a_planned_resource_leaves_the_label_cache_and_a_change_renders_it_again() -> None:
    """Once a resource's plan holds its lines the label cache lets them go (memory: ~7 MiB at
    10k series); a later change of shape renders its lines again, the same text."""
    store, translator = SeriesStore(), make_translator("otel")
    power = (_metric("hw.power", "W", MetricKind.GAUGE, (_point({}, 1.0),)),)
    resource = gpu(0)
    steady = ResourceMetrics(resource=resource, metrics=power, identity="g")
    translator.ingest(store, (steady,), 1.0)
    assert len(translator.labels) == 0
    before = render_text(store.families.values())[0]
    translator.ingest(store, (steady,), 2.0)  # replayed
    assert len(translator.labels) == 0
    assert render_text(store.families.values())[0] == before
    more = (*power, _metric("hw.energy", "J", MetricKind.SUM, (_point({}, 5.0),), True))
    translator.ingest(store, (ResourceMetrics(resource=resource, metrics=more, identity="g"),), 9)
    after = render_text(store.families.values())[0]
    assert before.split("\n")[2] in after.split("\n")  # the power line, rendered again alike
    assert "hw_energy_joules_total{" in after
    assert len(translator.labels) == 0  # planned again


def _steady_node(cycle: int) -> tuple[ResourceMetrics, ...]:
    """A node's batch as receivers send it cycle after cycle: the same resources and shapes,
    new values; point attributes the same dicts (the nvml receiver's) or equal new ones."""
    task = {"hw.gpu.task": "general"}
    out = []
    for index in range(2):
        metrics = (
            _metric("hw.power", "W", MetricKind.GAUGE, (_point(SHARED_TASK, 300.5 + cycle),)),
            _metric("hw.gpu.memory.usage", "By", MetricKind.GAUGE, (_point({}, 2**30 + cycle),)),
            _metric(
                "hw.gpu.utilization",
                "1",
                MetricKind.GAUGE,
                tuple(_point(dict(t), cycle / 10) for t in TASKS),  # equal, not the same dicts
            ),
            _metric("hw.energy", "J", MetricKind.SUM, (_point(dict(task), 10.0 * cycle),), True),
        )
        out.append(ResourceMetrics(resource=gpu(index), metrics=metrics, identity=f"gpu{index}"))
        for pod in ("a", "b"):  # a shared GPU: one allocation resource per holder, one identity
            share = (_metric("nvidia.gpu.allocation", "1", MetricKind.GAUGE, (_point({}, 0.5),)),)
            holder = gpu(index, **held_by(pod))
            out.append(ResourceMetrics(resource=holder, metrics=share, identity=("a", index)))
    return tuple(out)


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_a_steady_node_takes_no_general_path_after_its_first_batch(
    naming: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first batch every resource is replayed: no general path, no claim, no set
    replacement (settle), no label rendering, whatever the forms (one point, several, scaled
    dcgm integers, ints, dcgm's split families)."""
    store, translator = SeriesStore(), make_translator(naming)
    translator.ingest(store, _steady_node(0), 0.0)
    calls: list[str] = []
    general = GeneralPath.write_resource

    def spy_general(self: GeneralPath, *args: object, **kwargs: object) -> object:
        calls.append("general")
        return general(self, *args, **kwargs)  # type: ignore[arg-type]

    settle, claim = Family.settle, Family._claim
    monkeypatch.setattr(GeneralPath, "write_resource", spy_general)
    monkeypatch.setattr(
        Family, "settle", lambda f, b: calls.append(f"settle {f.name}") or settle(f, b)
    )
    monkeypatch.setattr(Family, "_claim", lambda f, k, p: calls.append("claim") or claim(f, k, p))
    for cycle in range(1, 4):
        stored, dropped = translator.ingest(store, _steady_node(cycle), float(cycle))
        assert (stored, dropped) == (16, 0)
    split_families = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL"}
    # dcgm's split families go through the general path of that one metric (and settle there)
    assert [c for c in calls if c.removeprefix("settle ") not in split_families] == []
    text = render_text(store.families.values())[0]
    assert "300.5" not in text and "303.5" in text  # the values moved
    assert store.series_count() == 16 + 2  # and the two GPUs' info series


def test_a_holder_leaving_while_another_joins_leaves_at_once() -> None:
    """Identity "s" reports holders a and b (both replayed), then a and c, where c writes
    another family: a is replayed, c takes the general path; b's line must still go at once."""
    store, translator = SeriesStore(), make_translator("otel")
    share = (_metric("nvidia.gpu.allocation", "1", MetricKind.GAUGE, (_point({}, 0.5),)),)
    other = (_metric("nvidia.gpu.other", "1", MetricKind.GAUGE, (_point({}, 1.0),)),)

    def holder(pod: str, metrics: tuple[Metric, ...] = share) -> ResourceMetrics:
        return ResourceMetrics(resource=gpu(0, **held_by(pod)), metrics=metrics, identity="s")

    translator.ingest(store, (holder("a"), holder("b")), 1.0)
    translator.ingest(store, (holder("a"), holder("b")), 2.0)
    translator.ingest(store, (holder("a"), holder("c", other)), 3.0)
    lines = metric_lines(store)
    assert sorted(x.split("{")[0] for x in lines) == [
        "nvidia_gpu_allocation_ratio",
        "nvidia_gpu_other_ratio",
    ]
    assert 'k8s_pod_name="b"' not in "\n".join(lines)


def test_replayed_values_are_spelled_as_the_format_wants() -> None:
    """NaN and the infinities are Go's spelling on a replay too (`value_line`), one point
    or several; ints stay ints; booleans are numbers."""
    store, translator = SeriesStore(), make_translator("otel")

    def node(one: object, several: tuple[object, object]) -> tuple[ResourceMetrics, ...]:
        metrics = (
            _metric("hw.power", "W", MetricKind.GAUGE, (_point({}, one),)),
            _metric(
                "x.y",
                "1",
                MetricKind.GAUGE,
                tuple(_point({"i": i}, v) for i, v in enumerate(several)),
            ),
        )
        return (ResourceMetrics(resource=gpu(0), metrics=metrics, identity="g"),)

    translator.ingest(store, node(1.0, (1.0, 2.0)), 1.0)  # the plan
    for one, several, expected in (
        (math.nan, (math.inf, -math.inf), ["NaN", "+Inf", "-Inf"]),
        (7, (True, 2**70), ["7", "1.0", str(2**70)]),
    ):
        assert translator.ingest(store, node(one, several), 2.0) == (3, 0)
        lines = metric_lines(store)
        assert [line.rsplit(" ", 1)[1] for line in lines] == expected


def test_a_point_whose_attributes_changed_is_not_replayed_under_its_old_line() -> None:
    """The same GPU and metric, another XID code on the point: a new line, the old one gone."""
    store, translator = SeriesStore(), make_translator("otel")

    def xid(code: int) -> tuple[ResourceMetrics, ...]:
        metric = _metric("nvidia.gpu.xid", "1", MetricKind.GAUGE, (_point({"code": code}, 1.0),))
        return (ResourceMetrics(resource=gpu(0), metrics=(metric,), identity="g"),)

    translator.ingest(store, xid(31), 1.0)
    translator.ingest(store, xid(31), 2.0)
    translator.ingest(store, xid(43), 3.0)
    lines = metric_lines(store)
    assert len(lines) == 1 and 'code="43"' in lines[0]


def test_a_scaled_step_without_a_conversion_replays_scaled_values() -> None:
    # Today every dcgm field with a unit factor is also an integer field, but a step scaled
    # without rounding must still be written scaled, never as the raw number.
    from otelgpu.exporters.prometheus import replay as replay_module
    from otelgpu.exporters.prometheus.value_text import Target, sample_line

    family = Family("DCGM_FI_DEV_SM_CLOCK", "gauge", "h")
    prefixes = ('DCGM_FI_DEV_SM_CLOCK{gpu="0"} ', 'DCGM_FI_DEV_SM_CLOCK{gpu="1"} ')
    for prefix in prefixes:
        family.write(0, prefix, "0\n", 1)
    attrs: tuple[dict[str, AttrValue], ...] = ({}, {})
    points = tuple(_point(a, v) for a, v in zip(attrs, (1.5e9, 7), strict=True))
    metric = _metric("hw.clock", "Hz", MetricKind.GAUGE, points)
    target = Target(family.name, "gauge", "h", scale=1e-6)
    descriptor = ("hw.clock", "Hz", MetricKind.GAUGE, False)
    step = replay_module.Several(descriptor, family, attrs, prefixes, target, *family.cells)
    assert replay_module._several(step, metric, 3)
    assert [value for _, value in family.lines()] == [
        sample_line(1.5e9, {}, target),
        sample_line(7, {}, target),
    ]
    assert family.stamp(prefixes[0]) == family.stamp(prefixes[1]) == 3
    assert dict(family.lines())[prefixes[0]].startswith("1500")  # MHz, not the 1.5e9 Hz
