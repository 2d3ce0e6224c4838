"""A steady batch (the same identities sending the same series as the last batch of those
identities) is taken whole, in C; whatever changes is told apart exactly as identity by
identity. Histories of batches give the same closing points with the whole-batch path and
without it, and with the encoder's trail (`ended/trail.py`: a batch whose trail is the last
one's is taken without being looked at) as without it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from otelgpu.exporters.otlp.encode import encode_bytes
from otelgpu.exporters.otlp.ended import FORGET_AFTER, EndedSeries, Receipt
from otelgpu.exporters.otlp.ended.trail import Trail
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, MetricKind, ResourceMetrics
from tests.unit.exporters.otlp.batches import INTERVAL, T0, gpu_resource, holders
from tests.unit.exporters.otlp.batches import gauge as _gauge

GPU = gpu_resource(0)[semconv.HW_ID]
UP_OK = {semconv.HW_ID: GPU, "hw.state": "ok"}
UP_DEGRADED = {semconv.HW_ID: GPU, "hw.state": "degraded"}
DEVICE = {semconv.HW_ID: GPU}
PROCESS = {semconv.HW_ID: GPU, "task": "sm"}
TASK = {semconv.HW_ID: GPU, "task": "general"}


class Identitywise(EndedSeries):
    """The memory without its whole-batch path: every batch told apart identity by identity."""

    def _remember_shape(self, batch: Batch, key: tuple[Any, ...], trail: Any = None) -> None:
        pass


def closes_traced(ended: EndedSeries, batch: Batch) -> tuple[Batch, Receipt]:
    """`ended.closes` as the exporter calls it (`exporter.request_of`): with the trail the
    encoder wrote of `batch`, unless the batch holds a gone marker."""
    if not all(rm.metrics for rm in batch):
        return ended.closes(batch)
    trail = Trail()
    encode_bytes(batch, None, trail)
    return ended.closes(batch, trail)


class Traced(EndedSeries):
    """The memory as the exporter feeds it: every batch with its trail."""

    def closing(self, batch: Batch) -> Batch:
        return closes_traced(self, batch)[0]


# The memory compared with `Identitywise`: fed batches alone, and with their trails
WHOLE = pytest.mark.parametrize("whole", [EndedSeries, Traced], ids=["batch", "trail"])


def _gpu(
    time: int, up: dict[str, Any], pod: str = "a", unit: str = "1", device: Any = DEVICE
) -> ResourceMetrics:
    return ResourceMetrics(
        resource={**gpu_resource(0), semconv.K8S_POD_NAME: pod},
        metrics=(
            _gauge("nvidia.gpu.up", time, (up, 1.0)),
            replace(_gauge("hw.gpu.utilization", time, (device, 0.5)), unit=unit),
        ),
        identity=GPU,
    )


def _process(time: int, pid: int) -> ResourceMetrics:
    metric = _gauge("nvidia.gpu.process.utilization", time, (PROCESS, 0.25))
    return ResourceMetrics(resource={semconv.PROCESS_PID: pid}, metrics=(metric,), identity=pid)


def _history() -> list[Batch]:
    """Steady stretches broken by each kind of change."""
    out: list[Batch] = []

    def steady(n: int, make: Any) -> None:
        for _ in range(n):
            out.append(make(T0 + len(out) * INTERVAL))

    steady(4, lambda t: (_gpu(t, UP_OK), _process(t, 1), _process(t, 2)))
    steady(4, lambda t: (_gpu(t, UP_DEGRADED), _process(t, 1), _process(t, 2)))  # state
    steady(3, lambda t: (_gpu(t, UP_DEGRADED), _process(t, 1)))  # process 2 ended, no marker
    steady(3, lambda t: (_gpu(t, UP_DEGRADED), _process(t, 1), _process(t, 3)))  # appeared
    # as many resources, metrics and points, one identity swapped for another
    steady(3, lambda t: (_gpu(t, UP_DEGRADED), _process(t, 1), _process(t, 5)))
    steady(3, lambda t: (_gpu(t, UP_DEGRADED), _process(t, 1), _process(t, 3)))
    steady(3, lambda t: (_gpu(t, UP_DEGRADED, pod="b"), _process(t, 1), _process(t, 3)))
    steady(3, lambda t: (_gpu(t, UP_DEGRADED, unit="%"), _process(t, 1), _process(t, 3)))
    # the unit changed, then the series ends: it is closed with the new unit
    steady(
        3, lambda t: (_gpu(t, UP_DEGRADED, unit="%", device=TASK), _process(t, 1), _process(t, 3))
    )
    # the same values in new mappings: the same series
    steady(3, lambda t: (_gpu(t, dict(UP_DEGRADED)), _process(t, 1), _process(t, 3)))
    steady(3, lambda t: (_gpu(t, UP_OK), ResourceMetrics(resource={}, metrics=(), identity=1)))
    # a shared GPU's allocation series (one identity, a resource per holder) beside it
    steady(4, lambda t: (*holders(t, "a", "b"), _gpu(t, UP_OK), _process(t, 4)))
    # the same identities, another holder: the shared GPU's part changes under a known shape
    steady(4, lambda t: (*holders(t, "a", "c"), _gpu(t, UP_OK), _process(t, 4)))
    steady(4, lambda t: (*holders(t, "a"), _gpu(t, UP_OK), _process(t, 4)))
    steady(3, lambda t: (*holders(t, "a"), _gpu(t, UP_DEGRADED), _process(t, 4)))
    # a metric without points beside the others (taken whole too), then with a point, then
    # without again: the point is closed at the time it was last sent
    steady(3, lambda t: (_extra(_gpu(t, UP_OK)), _process(t, 4)))
    steady(3, lambda t: (_extra(_gpu(t, UP_OK), (DEVICE, 2.0)), _process(t, 4)))
    steady(3, lambda t: (_extra(_gpu(t, UP_OK)), _process(t, 4)))
    steady(3, lambda t: (_gpu(t, UP_OK),))
    # the scope changes while the series stay (steady), then a series ends under the new one
    steady(3, lambda t: (_gpu(t, UP_OK), _process(t, 1)))
    steady(3, lambda t: (replace(_gpu(t, UP_OK), scope="other"), _process(t, 1)))
    steady(1, lambda t: (replace(_gpu(t, UP_DEGRADED), scope="other"), _process(t, 1)))
    # a value that only changes type is the same series (sent as other bytes)
    steady(3, lambda t: (_gpu(t, {**UP_OK, "index": 0}), _process(t, 1)))
    steady(3, lambda t: (_gpu(t, {**UP_OK, "index": "0"}), _process(t, 1)))
    # one identity's pid changes (its points sent with the other pid), then a series ends
    steady(3, lambda t: (_gpu(t, UP_OK), replace(_process(t, 8), identity="task")))
    steady(3, lambda t: (_gpu(t, UP_OK), replace(_process(t, 9), identity="task")))
    steady(1, lambda t: (_gpu(t, UP_OK), _task_process(t, 9)))
    return out


def _task_process(time: int, pid: int) -> ResourceMetrics:
    """The process of identity "task", reporting its general task instead of sm."""
    metric = _gauge("nvidia.gpu.process.utilization", time, (TASK, 0.25))
    return ResourceMetrics(resource={semconv.PROCESS_PID: pid}, metrics=(metric,), identity="task")


def _extra(rm: ResourceMetrics, *points: tuple[dict[str, Any], float]) -> ResourceMetrics:
    """`rm` with one more metric, first, holding `points` (maybe none)."""
    time = rm.metrics[0].points[0].time_unix_nano
    return replace(rm, metrics=(_gauge("nvidia.gpu.extra", time, *points), *rm.metrics))


def _closings(ended: EndedSeries, batches: list[Batch]) -> list[list[tuple[Any, ...]]]:
    out = []
    for batch in batches:
        closed = ended.closing(batch)
        out.append(
            sorted(
                (
                    m.name,
                    m.unit,
                    repr(sorted(m.points[0].attributes.items())),
                    m.points[0].time_unix_nano,
                    repr(sorted(rm.resource.items())),
                    rm.scope,
                )
                for rm in closed
                for m in rm.metrics
            )
        )
    return out


@WHOLE
def test_histories_close_the_same_with_and_without_the_whole_batch_path(
    whole: type[EndedSeries],
) -> None:
    history = _history()
    wall = [T0]
    whole, one_by_one = whole(wall=lambda: wall[0]), Identitywise(wall=lambda: wall[0])
    expected = _closings(one_by_one, history)
    assert sum(map(len, expected)) >= 8  # the history does close series
    assert _closings(whole, history) == expected


def test_a_steady_batch_is_taken_whole_and_a_change_is_not_missed() -> None:
    ended = EndedSeries()
    for cycle in range(3):
        time = T0 + cycle * INTERVAL
        batch = (*holders(time, "a", "b"), _gpu(time, UP_OK), _process(time, 1))
        assert ended.closing(batch) == ()
    assert len(ended._shapes) == 1  # the steady batch is known (but the shared GPU's part)
    time = T0 + 3 * INTERVAL
    (closed,) = ended.closing(
        (*holders(time, "a", "b"), _gpu(time, UP_DEGRADED), _process(time, 1))
    )
    assert [m.points[0].attributes for m in closed.metrics] == [UP_OK]
    assert closed.metrics[0].points[0].time_unix_nano == time  # the latest time was taken


@WHOLE
def test_a_batch_as_large_as_the_steady_ones_with_one_identity_swapped_is_told_apart(
    whole: type[EndedSeries],
) -> None:
    # Process 3 takes process 2's place: as many resources, metrics and points. Process 2 is
    # left alone until its gone marker, and process 3 is remembered under its own resource.
    ended = whole(wall=lambda: T0)
    for cycle in range(6):
        t = T0 + cycle * INTERVAL
        third = 2 if cycle < 4 else 3
        assert ended.closing((_gpu(t, UP_OK), _process(t, 1), _process(t, third))) == ()
    gone = tuple(ResourceMetrics(resource={}, metrics=(), identity=pid) for pid in (2, 3))
    closed = ended.closing((_gpu(T0 + 6 * INTERVAL, UP_OK), _process(T0, 1), *gone))
    assert sorted(
        (rm.resource[semconv.PROCESS_PID], rm.metrics[0].points[0].time_unix_nano) for rm in closed
    ) == [(2, T0 + 3 * INTERVAL + 1_000_000), (3, T0 + 5 * INTERVAL + 1_000_000)]


@WHOLE
def test_a_batch_as_large_as_the_steady_ones_with_one_point_swapped_closes_the_old_one(
    whole: type[EndedSeries],
) -> None:
    ended = whole(wall=lambda: T0)
    for cycle in range(4):
        t = T0 + cycle * INTERVAL
        assert ended.closing((_gpu(t, UP_OK), _process(t, 1), _process(t, 2))) == ()
    t = T0 + 4 * INTERVAL
    batch = (_gpu(t, UP_DEGRADED), _process(t, 1), _process(t, 2))  # the health state changed
    (closed,) = ended.closing(batch)
    assert [m.points[0].attributes for m in closed.metrics] == [UP_OK]
    assert ended.closing(replace_times(batch, t + INTERVAL)) == ()  # steady from then on


def replace_times(batch: Batch, time: int) -> Batch:
    """`batch` with every point at `time` (the same attribute mappings)."""
    return tuple(
        replace(
            rm,
            metrics=tuple(
                replace(m, points=tuple(replace(p, time_unix_nano=time) for p in m.points))
                for m in rm.metrics
            ),
        )
        for rm in batch
    )


@WHOLE
@pytest.mark.parametrize("cycles", [3, 5])
def test_a_steady_batch_takes_the_latest_resource_for_later_closing_points(
    cycles: int, whole: type[EndedSeries]
) -> None:
    ended = whole()
    for cycle in range(cycles):
        ended.closing((_gpu(T0 + cycle * INTERVAL, UP_OK, pod=f"pod-{cycle}"),))
    (closed,) = ended.closing(
        (ResourceMetrics(resource={}, metrics=(), identity=GPU),)  # the GPU is gone
    )
    assert closed.resource[semconv.K8S_POD_NAME] == f"pod-{cycles - 1}"


def _steady_then(ended: EndedSeries, wall: list[int], gaps: list[int]) -> list[list[Any]]:
    """Steady batches `gaps` apart on the wall clock (their points at those times), then a
    reload and batches of the GPU alone every 10 s until the processes are closed as overdue,
    then a sweep after they have been quiet for `FORGET_AFTER`: what each batch closed."""
    out: list[list[Any]] = []
    for gap in gaps:
        wall[0] += gap
        out += _closings(
            ended, [(_gpu(wall[0], UP_OK), _process(wall[0], 1), _process(wall[0], 2))]
        )
    ended.inherit()
    while not any(out[len(gaps) :]):
        wall[0] += 10 * 10**9
        out += _closings(ended, [(_gpu(wall[0], UP_OK),)])
    wall[0] += FORGET_AFTER + 120 * 10**9
    out += _closings(ended, [(_gpu(wall[0], UP_OK),)])
    assert len(ended) == 1  # the processes were forgotten, the GPU is remembered
    return out


@pytest.mark.parametrize(
    "gaps",
    [
        [10, 10, 10, 10, 10, 10],
        [10, 10, 10, 40, 10, 10],
        [10, 10, 50, 10, 10, 10],
        [10, 5, 10, 10, 10, 70],
    ],
    ids=["regular", "a-long-gap-among-steady-batches", "the-longest-gap-first", "last"],
)
@WHOLE
def test_steady_batches_leave_the_same_times_and_gaps_as_identity_by_identity(
    gaps: list[int],
    whole: type[EndedSeries],
) -> None:
    # Steady batches leave their report times to be taken later: when the reload's
    # overdue series close depends on the longest gap among them, their time on the last.
    gaps = [gap * 10**9 for gap in gaps]
    whole_wall, one_by_one_wall = [T0], [T0]
    expected = _steady_then(Identitywise(wall=lambda: one_by_one_wall[0]), one_by_one_wall, gaps)
    whole = whole(wall=lambda: whole_wall[0])
    assert _steady_then(whole, whole_wall, gaps) == expected
    assert sum(map(len, expected)) == 2  # both processes closed once, as overdue


@WHOLE
def test_identities_sent_steadily_longer_than_forget_after_are_not_forgotten(
    whole: type[EndedSeries],
) -> None:
    # The sweep looks at when each identity was last seen: steady batches must have told it.
    def history(ended: EndedSeries, wall: list[int]) -> tuple[list[list[Any]], list[int]]:
        out: list[list[Any]] = []
        remembered = []  # identities remembered after each batch
        for _ in range(2 * FORGET_AFTER // INTERVAL):
            wall[0] += INTERVAL
            out += _closings(ended, [(_gpu(wall[0], UP_OK), _process(wall[0], 1))])
            remembered.append(len(ended))
        wall[0] += INTERVAL
        gone = ResourceMetrics(resource={}, metrics=(), identity=1)  # the process ended
        return out + _closings(ended, [(_gpu(wall[0], UP_OK), gone)]), remembered

    whole_wall, one_by_one_wall = [T0], [T0]
    expected = history(Identitywise(wall=lambda: one_by_one_wall[0]), one_by_one_wall)
    assert set(expected[1]) == {2} and sum(map(len, expected[0])) == 1
    assert history(whole(wall=lambda: whole_wall[0]), whole_wall) == expected


def _two_times(time: int, empty_first: bool = False) -> ResourceMetrics:
    """A GPU whose metric has two points, the second taken 5 s after the first (after a
    metric reported without points, with `empty_first`)."""
    metric = _gauge("hw.gpu.utilization", time, (UP_OK, 0.5), (UP_DEGRADED, 0.25))
    late = replace(metric.points[1], time_unix_nano=time + 5 * 10**9)
    empty = (_gauge("nvidia.gpu.idle", time),) if empty_first else ()
    return ResourceMetrics(
        resource=gpu_resource(0),
        metrics=(*empty, replace(metric, points=(metric.points[0], late))),
        identity=GPU,
    )


@pytest.mark.parametrize("empty_first", [False, True], ids=["points-only", "a-metric-without"])
@pytest.mark.parametrize("cycles", [1, 5], ids=["told-apart", "steady"])
@WHOLE
def test_a_steady_metric_is_at_its_last_point_s_time_as_identity_by_identity(
    empty_first: bool,
    cycles: int,
    whole: type[EndedSeries],
) -> None:
    # The closing points come a millisecond after the metric's time, its last point's (the
    # clock stands at T0). Reported once, the metric is told apart; five times, it is taken
    # as steady.
    batches: list[Batch] = [
        (_two_times(T0 + cycle * INTERVAL, empty_first),) for cycle in range(cycles)
    ]
    batches.append((ResourceMetrics(resource={}, metrics=(), identity=GPU),))  # the GPU is gone
    expected = _closings(Identitywise(wall=lambda: T0), batches)
    assert _closings(whole(wall=lambda: T0), batches) == expected
    last = T0 + (cycles - 1) * INTERVAL + 5 * 10**9
    assert {point[3] for point in expected[-1]} == {last + 1_000_000}


def _moved(time: int, first: tuple[int, ...], second: tuple[int, ...]) -> Batch:
    """Two identities ("x", "y") of one metric each, the points `first` and `second` of the
    same three attribute mappings: one batch and the next may list the same points, in the
    same order, split otherwise between them."""
    shared = [{"n": str(n)} for n in range(3)]

    def rm(identity: str, indices: tuple[int, ...]) -> ResourceMetrics:
        metric = _gauge("m", time, *((shared[index], 1.0) for index in indices))
        return ResourceMetrics(resource={"id": identity}, metrics=(metric,), identity=identity)

    return (rm("x", first), rm("y", second))


def _metrics_moved(time: int, moved: bool) -> Batch:
    """Two identities with metrics a and b, and c: then a, and b and c (the same descriptors
    and points in the same order, split otherwise between them)."""

    def rm(identity: str, names: tuple[str, ...]) -> ResourceMetrics:
        metrics = tuple(_gauge(name, time, (DEVICE, 1.0)) for name in names)
        return ResourceMetrics(resource={"id": identity}, metrics=metrics, identity=identity)

    if moved:
        return (rm("x", ("a",)), rm("y", ("b", "c")))
    return (rm("x", ("a", "b")), rm("y", ("c",)))


@pytest.mark.parametrize("what", ["points", "metrics"])
@WHOLE
def test_a_batch_splitting_the_same_series_otherwise_is_not_taken_for_a_steady_one(
    what: str,
    whole: type[EndedSeries],
) -> None:
    def batch(cycle: int, moved: bool) -> Batch:
        time = T0 + cycle * INTERVAL
        if what == "points":
            return _moved(time, (0,), (1, 2)) if moved else _moved(time, (0, 1), (2,))
        return _metrics_moved(time, moved)

    batches = [batch(cycle, moved=False) for cycle in range(4)]
    batches += [batch(cycle, moved=True) for cycle in range(4, 6)]
    batches.append(
        tuple(ResourceMetrics(resource={}, metrics=(), identity=i) for i in ("x", "y"))
    )  # both gone: each closes what it holds
    expected = _closings(Identitywise(wall=lambda: T0), batches)
    assert _closings(whole(wall=lambda: T0), batches) == expected
    # each of the four series (x's and y's, and the one that moved from x to y) closes once
    assert sum(map(len, expected)) == 4


def _reload_after(ended: EndedSeries, wall: list[int], batches: list[Batch]) -> list[list[Any]]:
    """`batches` 10 s apart, a reload, then the GPU alone every 10 s: what each batch closed."""
    out: list[list[Any]] = []
    for batch in batches:
        wall[0] += 10 * 10**9
        out += _closings(ended, [batch])
    ended.inherit()
    for _ in range(5):
        wall[0] += 10 * 10**9
        out += _closings(ended, [(_gpu(wall[0], UP_OK),)])
    return out


@WHOLE
def test_a_shape_taken_again_after_another_batch_counts_only_its_own_gaps(
    whole: type[EndedSeries],
) -> None:
    # The batch of other identities in between is 10 s from each of its neighbours: the
    # processes' longest gap stays 10 s, and they close 20 s after the reload's first batch.
    def batch(cycle: int) -> Batch:
        t = T0 + cycle * INTERVAL
        three = (_process(t, 3),) if cycle == 4 else ()
        return (_gpu(t, UP_OK), _process(t, 1), _process(t, 2), *three)

    batches = [batch(cycle) for cycle in range(8)]
    whole_wall, one_by_one_wall = [T0], [T0]
    expected = _reload_after(
        Identitywise(wall=lambda: one_by_one_wall[0]), one_by_one_wall, batches
    )
    assert _reload_after(whole(wall=lambda: whole_wall[0]), whole_wall, batches) == expected
    closed_per_batch = list(map(len, expected[len(batches) :]))
    assert closed_per_batch == [0, 0, 2, 1, 0]  # processes 1 and 2 after 20 s, 3 after 30 s


@WHOLE
def test_a_metric_changed_in_every_descriptor_field_is_not_taken_for_a_steady_one(
    whole: type[EndedSeries],
) -> None:
    def report(time: int, changed: bool) -> Batch:
        metric = _gauge("hw.gpu.utilization", time, (DEVICE, 0.5))
        if changed:
            metric = replace(
                metric,
                name="hw.gpu.busy",
                unit="%",
                description="busy",
                kind=MetricKind.SUM,
                monotonic=True,
            )
        return (ResourceMetrics(resource=gpu_resource(0), metrics=(metric,), identity=GPU),)

    batches = [report(T0 + cycle * INTERVAL, changed=cycle >= 4) for cycle in range(6)]
    batches.append((ResourceMetrics(resource={}, metrics=(), identity=GPU),))  # the GPU is gone
    expected = _closings(Identitywise(wall=lambda: T0), batches)
    assert _closings(whole(wall=lambda: T0), batches) == expected
    assert sorted(point[0] for point in expected[-1]) == ["hw.gpu.busy", "hw.gpu.utilization"]


@WHOLE
def test_steady_batches_at_one_wall_time_leave_no_gap(whole: type[EndedSeries]) -> None:
    # A coarse wall clock: every batch before the reload at one wall time. The processes have
    # no known gap, so they wait twice 15 s after the reload's first batch, as if reported once.
    def run(ended: EndedSeries, wall: list[int]) -> list[int]:
        for cycle in range(5):
            t = T0 + cycle * INTERVAL
            ended.closing((_gpu(t, UP_OK), _process(t, 1), _process(t, 2)))
        ended.inherit()
        closed = []
        for step in [0, 1, 29 * 10**9, 10**9]:
            wall[0] += step
            closed.append(len(ended.closing((_gpu(wall[0], UP_OK),))))
        return closed

    whole_wall, one_by_one_wall = [T0], [T0]
    expected = run(Identitywise(wall=lambda: one_by_one_wall[0]), one_by_one_wall)
    assert run(whole(wall=lambda: whole_wall[0]), whole_wall) == expected == [0, 0, 0, 2]


@WHOLE
def test_batches_of_two_steady_shapes_in_turn_leave_each_its_latest_resource(
    whole: type[EndedSeries],
) -> None:
    # Two pipelines' batches (the GPU's, and other processes'), each steady, come in turn:
    # what the GPU's last steady batch sent is what its closing points are sent under.
    ended = whole(wall=lambda: T0)

    def gpu_batch(cycle: int) -> Batch:
        t = T0 + cycle * INTERVAL
        return (_gpu(t, UP_OK, pod=f"pod-{cycle}"), _process(t, 1))

    def others(cycle: int) -> Batch:
        t = T0 + cycle * INTERVAL
        return (_process(t, 7), _process(t, 8))

    # (the GPU's shape takes batch 6 looking at it, batch 7 from its trail alone)
    turns = [*map(gpu_batch, (0, 1, 2)), *map(others, (3, 4, 5)), *map(gpu_batch, (6, 7))]
    for batch in [*turns, others(8)]:
        assert ended.closing(batch) == ()
    (closed,) = ended.closing((ResourceMetrics(resource={}, metrics=(), identity=GPU),))
    assert closed.resource[semconv.K8S_POD_NAME] == "pod-7"


@WHOLE
def test_a_batch_carrying_owed_points_again_keeps_the_resource_it_sent(
    whole: type[EndedSeries],
) -> None:
    # A batch that carries a failed request's closing points again is told apart identity by
    # identity; the steady batches before it must not overwrite what it sent.
    ended = whole(wall=lambda: T0)
    send = closes_traced if whole is Traced else EndedSeries.closes

    def batch(cycle: int, up: dict[str, Any] = UP_OK) -> Batch:
        t = T0 + cycle * INTERVAL
        return (_gpu(t, up, pod=f"pod-{cycle}"), _process(t, 1), _process(t, 2))

    send(ended, batch(0, UP_DEGRADED))
    send(ended, batch(1, UP_DEGRADED))
    closed, receipt = send(ended, batch(2))  # degraded closed; its request fails
    assert len(closed) == 1
    for cycle in (3, 4, 5):
        assert send(ended, batch(cycle))[0] == ()
    ended.refused(receipt)
    (again,) = send(ended, batch(6))[0]  # the owed point, sent again
    assert [m.points[0].attributes for m in again.metrics] == [UP_DEGRADED]
    (closed_now,) = send(ended, batch(7, UP_DEGRADED))[0]  # ok ends
    assert [m.points[0].attributes for m in closed_now.metrics] == [UP_OK]
    assert closed_now.resource[semconv.K8S_POD_NAME] == "pod-6"


@WHOLE
def test_a_dropped_shape_is_not_kept(whole: type[EndedSeries]) -> None:
    # A shape holds a whole batch's attribute mappings and entries: once a change drops it,
    # the memory keeps no reference to it (a new one is made for the new batch).
    ended = whole(wall=lambda: T0)
    for cycle in range(3):
        t = T0 + cycle * INTERVAL
        ended.closing((_gpu(t, UP_OK), _process(t, 1)))
    (shape,) = ended._shapes.values()
    t = T0 + 3 * INTERVAL
    assert len(ended.closing((_gpu(t, UP_DEGRADED), _process(t, 1)))) == 1  # drops the shape
    held = [*ended._shapes.values(), ended._pending, *(ended._steady or ())]
    assert held and all(kept is not shape for kept in held)


class _Unread:
    """A resource no one may look at: any attribute read fails the test."""

    def __getattribute__(self, name: str) -> Any:
        raise AssertionError(f"a steady batch with its trail was read ({name})")


def test_a_steady_batch_with_its_trail_is_not_read() -> None:
    # The exporter's steady cycle: what the batch sends is known from the encoder's trail, so
    # the memory reads nothing of it (the first steady batch after the shape is learnt, and
    # the first after another pipeline's batch came in between), and keeps what it sent.
    ended = EndedSeries(wall=lambda: T0)

    def batch(cycle: int) -> Batch:
        t = T0 + cycle * INTERVAL
        return (_gpu(t, UP_OK, pod=f"pod-{cycle}"), _process(t, 1))

    def unread(cycle: int) -> None:
        trail = Trail()
        encode_bytes(batch(cycle), None, trail)
        assert ended.closes((_Unread(), _Unread()), trail) == ((), ())  # type: ignore[arg-type]

    closes_traced(ended, batch(0))
    closes_traced(ended, batch(1))  # the same identities twice: the shape is learnt
    unread(2)
    unread(3)
    closes_traced(ended, (_process(T0, 7),))  # another pipeline's batch
    closes_traced(ended, batch(5))  # compared with the shape
    unread(6)
    (closed,) = ended.closing((ResourceMetrics(resource={}, metrics=(), identity=GPU),))
    assert closed.resource[semconv.K8S_POD_NAME] == "pod-6"
    # at the time of the last batch's points (a millisecond after: the marker has none)
    assert {p.time_unix_nano for m in closed.metrics for p in m.points} == {
        T0 + 6 * INTERVAL + 1_000_000
    }


def test_a_batch_compared_after_one_taken_from_its_trail_is_the_one_kept() -> None:
    # Batch 3 is taken from its trail alone (the trail is held); batch 4, in another scope, has
    # another trail and is compared with the shape instead. What the entries take when the GPU
    # goes is batch 4's resource and scope, not the held trail's.
    ended = Traced(wall=lambda: T0)
    for cycle in range(4):
        t = T0 + cycle * INTERVAL
        assert ended.closing((_gpu(t, UP_OK, pod="a"), _process(t, 1))) == ()
    t = T0 + 4 * INTERVAL
    assert ended.closing((replace(_gpu(t, UP_OK, pod="b"), scope="other"), _process(t, 1))) == ()
    (closed,) = ended.closing((ResourceMetrics(resource={}, metrics=(), identity=GPU),))
    assert (closed.resource[semconv.K8S_POD_NAME], closed.scope) == ("b", "other")


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_steady_batches_past_the_identity_limit_close_as_identity_by_identity(limit: int) -> None:
    # More identities than the memory keeps: each batch forgets the first remembered, and
    # a shape that listed one is never taken again.
    history = [(_gpu(T0 + c * INTERVAL, UP_OK), _process(T0, 1), _process(T0, 2)) for c in range(6)]
    history.append(tuple(ResourceMetrics(resource={}, metrics=(), identity=i) for i in (GPU, 1, 2)))
    expected = _closings(Identitywise(wall=lambda: T0, limit=limit), history)
    assert _closings(Traced(wall=lambda: T0, limit=limit), history) == expected
    assert _closings(EndedSeries(wall=lambda: T0, limit=limit), history) == expected
