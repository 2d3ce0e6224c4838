"""After a reload, an identity the new configuration does not send is closed once it is overdue:
not reported within twice its longest gap between two reports (15 s when it was reported once),
counted from the new exporter's first batch. These drive the memory directly with a wall clock
of their own; the gaps are measured on a shared GPU's identity of several resources, whose
reports are told apart series by series, never renewed in place."""

from __future__ import annotations

from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.unit.exporters.otlp.batches import T0, gauge, gpu_resource, holders

SECOND = 1_000_000_000
DEVICE = {semconv.HW_ID: gpu_resource(0)[semconv.HW_ID]}
GPU = DEVICE[semconv.HW_ID]


def _memory() -> tuple[EndedSeries, list[int]]:
    now = [T0]
    return EndedSeries(wall=lambda: now[0]), now


def _shared(time: int) -> Batch:
    """A GPU shared by two holders: one identity, two resources."""
    return holders(time, "a", "b")


def _closed_at(ended: EndedSeries, now: list[int], walls: list[int]) -> list[int]:
    """Of `walls` (after the first batch at `walls[0]`), those whose batch closed something."""
    out = []
    for wall in walls:
        now[0] = wall
        if ended.closing(()):
            out.append(wall)
    return out


def test_an_identity_reported_once_before_a_reload_is_closed_after_twice_15_seconds() -> None:
    ended, now = _memory()
    ended.closing(_shared(T0))
    ended.inherit()
    since = T0 + 5 * SECOND
    walls = [since, since + 30 * SECOND - 1, since + 30 * SECOND]
    assert _closed_at(ended, now, walls) == [since + 30 * SECOND]


def test_the_overdue_wait_is_twice_the_longest_gap_between_two_reports() -> None:
    ended, now = _memory()
    gaps = [20 * SECOND, 20 * SECOND + 1, 3 * SECOND]  # the longest is 20 s + 1 ns
    wall = T0
    now[0] = wall
    ended.closing(_shared(wall))
    for gap in gaps:
        wall += gap
        now[0] = wall
        assert ended.closing(_shared(wall)) == ()
    ended.inherit()
    since = wall + SECOND
    longest = 20 * SECOND + 1
    walls = [since, since + 2 * longest - 1, since + 2 * longest]
    assert _closed_at(ended, now, walls) == [since + 2 * longest]


def _gpu(time: int, *names: str) -> Batch:
    """A GPU reporting the metrics `names`, one point each."""
    return (
        ResourceMetrics(
            resource=gpu_resource(0),
            metrics=tuple(gauge(name, time, (DEVICE, 1.0)) for name in names),
            identity=GPU,
        ),
    )


def test_a_metric_left_alone_before_a_reload_is_closed_once_overdue() -> None:
    # The GPU stopped reporting `b` (left alone: not closed) and the new configuration sends
    # `a` alone: `b` is one of the series it does not send again.
    ended, now = _memory()
    wall = T0
    for names in [("a", "b"), ("a",), ("a",)]:
        now[0] = wall
        assert ended.closing(_gpu(wall, *names)) == ()
        wall += 10 * SECOND
    ended.inherit()
    closed = []
    for _ in range(4):  # overdue 20 s after the first batch: twice its 10 s gap
        now[0] = wall
        closed.append([m.name for rm in ended.closing(_gpu(wall, "a")) for m in rm.metrics])
        wall += 10 * SECOND
    assert closed == [[], [], ["b"], []]
