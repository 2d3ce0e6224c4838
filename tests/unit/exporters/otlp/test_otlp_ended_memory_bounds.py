"""The ended-series memory's bounds in time and size: when an identity and an owed closing
point are forgotten, how often the memory looks, and how many owed points it keeps."""

from __future__ import annotations

from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.unit.exporters.otlp.batches import T0
from tests.unit.exporters.otlp.batches import gauge as _gauge

MINUTE = 60 * 10**9
FORGET_AFTER = 5 * MINUTE  # the documented five minutes


def _reports(identity: str, time: int, state: str = "ok") -> Batch:
    metric = _gauge("nvidia.gpu.up", time, ({"hw.state": state}, 1.0))
    return (ResourceMetrics(resource={}, metrics=(metric,), identity=identity),)


def _closed(batch: Batch) -> list[tuple[str, dict[str, object]]]:
    """(metric, point attributes) of every closing point in `batch`."""
    return [(m.name, dict(p.attributes)) for rm in batch for m in rm.metrics for p in m.points]


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def _remembered_after(unreported: int) -> int:
    """How many identities a memory holds once `pod-a`, reported at T0, went unreported for
    `unreported` ns and `pod-b` reports then (the first look of the memory)."""
    clock = _Clock()
    ended = EndedSeries(wall=clock)
    ended.closing(_reports("pod-a", T0))
    clock.now = T0 + unreported
    ended.closing(_reports("pod-b", clock.now))
    return len(ended)


def test_an_identity_unreported_for_exactly_five_minutes_is_still_remembered() -> None:
    assert _remembered_after(FORGET_AFTER) == 2


def test_an_identity_unreported_a_nanosecond_past_five_minutes_is_forgotten() -> None:
    assert _remembered_after(FORGET_AFTER + 1) == 1


def test_the_memory_looks_for_identities_to_forget_once_a_minute() -> None:
    """Looking costs a pass over every identity: it happens a minute after the last look, not
    sooner, and not later."""
    clock = _Clock()
    ended = EndedSeries(wall=clock)
    ended.closing(_reports("pod-a", T0))
    clock.now = T0 + FORGET_AFTER  # a look: pod-a is exactly five minutes old, kept
    ended.closing(_reports("pod-b", clock.now))
    assert len(ended) == 2
    clock.now = T0 + FORGET_AFTER + MINUTE - 1  # pod-a is past five minutes; no look yet
    ended.closing(_reports("pod-b", clock.now))
    assert len(ended) == 2
    clock.now = T0 + FORGET_AFTER + MINUTE  # the next look forgets it
    ended.closing(_reports("pod-b", clock.now))
    assert len(ended) == 1


def _owed_after(unsettled: int) -> int:
    """How many closing points a memory still owes once one, first sent at T0, went unsettled
    for `unsettled` ns and another identity reports then (the memory's first look)."""
    clock = _Clock()
    ended = EndedSeries(wall=clock)
    ended.closing(_reports("gpu", T0, "degraded"))
    ended.closing(_reports("gpu", T0, "ok"))  # closes the degraded series: owed
    assert ended.owed == 1
    clock.now = T0 + unsettled
    ended.closing(_reports("pod", clock.now))
    return ended.owed


def test_a_closing_point_owed_for_exactly_five_minutes_is_still_owed() -> None:
    assert _owed_after(FORGET_AFTER) == 1


def test_a_closing_point_owed_a_nanosecond_past_five_minutes_is_owed_no_more() -> None:
    assert _owed_after(FORGET_AFTER + 1) == 0


def test_the_owed_closing_points_are_bounded_by_the_memory_s_limit() -> None:
    """A backend refusing every request does not make the owed points pile up: past the limit,
    the first owed is dropped first."""
    ended = EndedSeries(wall=lambda: T0, limit=2)
    for index in range(3):
        identity = f"gpu-{index}"
        ended.closing(_reports(identity, T0, "degraded"))
        ended.closing(_reports(identity, T0, "ok"))
    assert ended.owed == 2


def test_an_unhashable_identity_reported_again_is_sent_and_not_tracked() -> None:
    metric = _gauge("m", T0, ({"a": "1"}, 1.0))
    batch = (ResourceMetrics(resource={}, metrics=(metric,), identity=("gpu", {"x": 1})),)
    ended = EndedSeries(wall=lambda: T0)
    for _ in range(3):
        assert ended.closing(batch) == ()
    assert len(ended) == 0


def test_an_identity_spread_over_three_resources_remembers_all_of_them() -> None:
    batch = tuple(
        ResourceMetrics(resource={}, metrics=(_gauge(name, T0, ({}, 1.0)),), identity="gpu")
        for name in ("a", "b", "c")
    )
    ended = EndedSeries(wall=lambda: T0)
    ended.closing(batch)
    gone = (ResourceMetrics(resource={}, metrics=(), identity="gpu"),)
    assert sorted(name for name, _ in _closed(ended.closing(gone))) == ["a", "b", "c"]


def _owing_one() -> tuple[EndedSeries, object]:
    """A memory owing one closing point, and the receipt of the request carrying it."""
    ended = EndedSeries(wall=lambda: T0)
    ended.closes(_reports("gpu", T0, "degraded"))
    closed, receipt = ended.closes(_reports("gpu", T0, "ok"))
    assert len(_closed(closed)) == 1
    return ended, receipt


def test_a_closing_point_refused_again_and_again_is_carried_again_each_time() -> None:
    ended, receipt = _owing_one()
    for _ in range(3):
        ended.refused(receipt)  # type: ignore[arg-type]
        closed, receipt = ended.closes(_reports("other", T0))
        assert _closed(closed) == [("nvidia.gpu.up", {"hw.state": "degraded"})]


def test_a_refusal_told_twice_carries_its_closing_point_once() -> None:
    ended, receipt = _owing_one()
    ended.refused(receipt)  # type: ignore[arg-type]
    ended.refused(receipt)  # type: ignore[arg-type]
    closed, _ = ended.closes(_reports("other", T0))
    assert _closed(closed) == [("nvidia.gpu.up", {"hw.state": "degraded"})]


def test_a_closing_point_in_flight_at_a_reload_is_carried_once_by_the_next_request() -> None:
    """The old exporter's request may still fail after the reload: its refusal does not carry
    the point twice."""
    ended, receipt = _owing_one()
    ended.inherit()
    ended.refused(receipt)  # type: ignore[arg-type]
    closed, _ = ended.closes(_reports("gpu", T0, "ok"))
    assert _closed(closed) == [("nvidia.gpu.up", {"hw.state": "degraded"})]


def test_a_second_reload_waits_from_its_own_first_batch() -> None:
    clock = _Clock()
    ended = EndedSeries(wall=clock)
    second = 10**10
    for at in (0, 1):  # gpu reports every ten seconds
        clock.now = T0 + at * second
        ended.closing(_reports("gpu", clock.now))
    ended.inherit()
    clock.now = T0 + 2 * second
    ended.closing(_reports("other", clock.now))  # the first batch after the first reload
    clock.now = T0 + 3 * second
    ended.closing(_reports("gpu", clock.now))  # sent again in time: kept
    ended.inherit()
    clock.now = T0 + 11 * second
    assert _closed(ended.closing(_reports("other", clock.now))) == []  # its wait starts now
    clock.now = T0 + 15 * second
    assert _closed(ended.closing(_reports("other", clock.now))) == [
        ("nvidia.gpu.up", {"hw.state": "ok"})
    ]


def test_an_identity_that_kept_a_metric_over_a_reload_still_closes_it_later() -> None:
    clock = _Clock()
    ended = EndedSeries(wall=clock)

    def sends(*names: str) -> Batch:
        metrics = tuple(_gauge(name, clock.now, ({}, 1.0)) for name in names)
        return (ResourceMetrics(resource={}, metrics=metrics, identity="gpu"),)

    for at in (0, 1):
        clock.now = T0 + at * 10**10
        ended.closing(sends("kept", "dropped"))
    ended.inherit()
    for at in (2, 3, 4):  # the new configuration sends only `kept`
        clock.now = T0 + at * 10**10
        ended.closing(sends("kept"))
    assert len(ended) == 1
    gone = (ResourceMetrics(resource={}, metrics=(), identity="gpu"),)
    assert [name for name, _ in _closed(ended.closing(gone))] == ["kept"]


def test_an_identity_whose_owed_points_are_all_accepted_leaves_no_count_behind() -> None:
    """The count of points each identity owes is memory too: it goes with the last of them."""
    ended = EndedSeries(wall=lambda: T0)
    metrics = (_gauge("a", T0, ({"s": "1"}, 1.0)), _gauge("b", T0, ({"s": "1"}, 1.0)))
    ended.closes((ResourceMetrics(resource={}, metrics=metrics, identity="gpu"),))
    closed, receipt = ended.closes((ResourceMetrics(resource={}, metrics=(), identity="gpu"),))
    assert len(_closed(closed)) == 2
    ended.accepted(receipt)
    assert ended.owed == 0
    assert ended._owing == {}


def test_the_descriptors_remembered_are_bounded_by_the_memory_s_limit() -> None:
    ended = EndedSeries(wall=lambda: T0, limit=2)
    for name in ("a", "b", "c", "d"):
        metric = _gauge(name, T0, ({}, 1.0))
        ended.closing((ResourceMetrics(resource={}, metrics=(metric,), identity=name),))
        assert len(ended._descriptors) <= 2


def test_the_steady_batches_remembered_are_bounded() -> None:
    """One shape per pipeline usually; batches of ever new identities do not pile them up."""
    ended = EndedSeries(wall=lambda: T0)
    for index in range(6):
        batch = _reports(f"gpu-{index}", T0)
        for _ in range(3):
            ended.closing(batch)
        assert len(ended._shapes) <= 4


def _gone(identity: str) -> Batch:
    return (ResourceMetrics(resource={}, metrics=(), identity=identity),)


def test_a_steady_identity_forgotten_after_five_minutes_is_remembered_when_it_returns() -> None:
    clock = _Clock()
    ended = EndedSeries(wall=clock)
    for _ in range(3):  # a steady batch
        ended.closing(_reports("gpu", T0))
    clock.now = T0 + FORGET_AFTER + 1
    ended.closing(_reports("other", clock.now))  # the look forgets gpu
    assert len(ended) == 1
    for _ in range(2):  # gpu comes back with its old batch
        ended.closing(_reports("gpu", T0))
    assert _closed(ended.closing(_gone("gpu"))) == [("nvidia.gpu.up", {"hw.state": "ok"})]


def test_a_steady_identity_dropped_past_the_limit_is_remembered_when_it_returns() -> None:
    ended = EndedSeries(wall=lambda: T0, limit=1)
    for _ in range(3):  # a steady batch
        ended.closing(_reports("gpu", T0))
    ended.closing(_reports("other", T0))  # past the limit: gpu is dropped
    for _ in range(2):  # gpu comes back with its old batch
        ended.closing(_reports("gpu", T0))
    assert _closed(ended.closing(_gone("gpu"))) == [("nvidia.gpu.up", {"hw.state": "ok"})]


def test_after_a_reload_an_identity_is_waited_for_twice_its_longest_gap_to_the_nanosecond() -> None:
    clock = _Clock()
    ended = EndedSeries(wall=clock)
    second = 10**9
    # gpu reports ten seconds apart, then ten seconds and a nanosecond (other reports between)
    for at, identity in [
        (0, "gpu"),
        (1, "other"),
        (10 * second, "gpu"),
        (10 * second + 1, "other"),
        (20 * second + 1, "gpu"),
    ]:
        clock.now = T0 + at
        ended.closing(_reports(identity, clock.now))
    ended.inherit()
    since = T0 + 30 * second
    clock.now = since
    ended.closing(_reports("other", clock.now))
    clock.now = since + 2 * (10 * second + 1) - 1
    assert _closed(ended.closing(_reports("other", clock.now))) == []
    clock.now = since + 2 * (10 * second + 1)
    assert _closed(ended.closing(_reports("other", clock.now))) == [
        ("nvidia.gpu.up", {"hw.state": "ok"})
    ]


def test_a_closing_point_in_flight_at_a_reload_is_carried_by_the_next_request() -> None:
    """Whatever became of the old exporter's request, the new exporter's first one carries
    what it carried."""
    ended, _ = _owing_one()
    ended.inherit()
    closed, _ = ended.closes(_reports("gpu", T0, "ok"))
    assert _closed(closed) == [("nvidia.gpu.up", {"hw.state": "degraded"})]


def test_a_steady_identity_closed_after_a_reload_is_remembered_when_it_returns() -> None:
    clock = _Clock()
    ended = EndedSeries(wall=clock)
    steady = _reports("gpu", T0)
    for at in (0, 1, 2):  # a steady batch, ten seconds apart
        clock.now = T0 + at * 10**10
        ended.closing(steady)
    ended.inherit()
    for at in (3, 6):  # the new configuration does not send gpu: closed when overdue
        clock.now = T0 + at * 10**10
        ended.closing(_reports("other", clock.now))
    assert len(ended) == 1
    for at in (7, 8):  # gpu comes back with its old batch
        clock.now = T0 + at * 10**10
        ended.closing(steady)
    assert _closed(ended.closing(_gone("gpu"))) == [("nvidia.gpu.up", {"hw.state": "ok"})]
