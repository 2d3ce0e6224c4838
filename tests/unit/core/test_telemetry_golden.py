"""Self-telemetry's collection, pinned: names, units, descriptions, kinds, monotonicity,
attribute sets (and their order), values and their types, and the order of metrics and
points, after a fixed sequence of calls. The expected collections were recorded from the
OpenTelemetry-SDK implementation this module replaced, so the exposition and the pushed
self-telemetry do not change shape. Timestamps are checked by rule, not by value. The agent's
instruments come from its table; the test declares a few of its own beside them."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest

from otelgpu import __version__
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.component.telemetry_table import INSTRUMENTS, counter, gauge
from otelgpu.pdata.model import MetricKind, ResourceMetrics

V = __version__
UP = "1 if the source answered its last request, 0 if not"
LAST = "Unix time of the source's last success"
DURATION = "How long the receiver's last collection took"
QUEUE = "What waits in the sending queue, in its sizer's unit: bytes as held (points with sizer: items, batches with sizer: requests)"
BUILD = "Always 1; the agent's version as a label"
RELOAD_OK = "1 if the last configuration reload (SIGHUP) was applied, 0 if it was rejected"
RELOAD_TS = "Unix time the running configuration was loaded (at start or by a reload)"
AGE = "Age of the pod-resources snapshot in use"

# The agent's instruments, then the test's own (declared after them, as instruments created
# at their first use were).
TABLE = (
    *INSTRUMENTS,
    counter("otelgpu_b_total", "B things", "z", "a"),
    counter("otelgpu_zero_total", "never created"),
    counter("otelgpu_nan_total", "not finite: ignored"),
    gauge("otelgpu_custom_gauge", "", "a", "b"),
    gauge("otelgpu_nan_gauge", "", "x"),
    counter("otelgpu_shared_total", "shared", "worker"),
    counter("otelgpu_own_total", "own", "worker"),
)

Row = tuple[str, str, str, str, bool, list[tuple[list[tuple[str, Any]], str, Any]]]


def _sum(name: str, description: str, *points: tuple[list[tuple[str, Any]], str, Any]) -> Row:
    return (name, "", description, "sum", True, list(points))


def _gauge(
    name: str, unit: str, description: str, *points: tuple[list[tuple[str, Any]], str, Any]
) -> Row:
    return (name, unit, description, "gauge", False, list(points))


def _normalised(rm: ResourceMetrics, before: int, after: int) -> list[Row]:
    """The collection without its timestamps, after checking them: every point carries the
    collection's one time; gauges carry no start time; sums a start time before it."""
    assert (rm.scope, rm.scope_version, rm.schema_url) == ("otelgpu.telemetry", "", "")
    assert (rm.identity, rm.notes) == (None, None)
    assert list(rm.resource.items()) == [("service.name", "otelgpu"), ("service.version", V)]
    times = {p.time_unix_nano for m in rm.metrics for p in m.points}
    assert len(times) == 1 and before <= times.pop() <= after
    rows: list[Row] = []
    for m in rm.metrics:
        for p in m.points:
            if m.kind is MetricKind.SUM:
                assert 0 < p.start_time_unix_nano <= p.time_unix_nano
            else:
                assert p.start_time_unix_nano == 0
        points = [(list(p.attributes.items()), type(p.value).__name__, p.value) for p in m.points]
        rows.append((m.name, m.unit, m.description, m.kind.value, m.monotonic, points))
    return rows


def _collect(telemetry: SelfTelemetry) -> tuple[ResourceMetrics, list[Row]]:
    before = time.time_ns()
    rm = telemetry.collect()
    return rm, _normalised(rm, before, time.time_ns())


def _starts(rm: ResourceMetrics) -> dict[tuple[str, tuple[tuple[str, Any], ...]], int]:
    return {
        (m.name, tuple(p.attributes.items())): p.start_time_unix_nano
        for m in rm.metrics
        if m.kind is MetricKind.SUM
        for p in m.points
    }


FIRST: list[Row] = [
    _sum("otelgpu_b_total", "B things", ([("z", "1"), ("a", "2")], "int", 5)),
    _sum("otelgpu_receiver_points_total", "Points produced", ([("receiver", "nvml")], "int", 5)),
    _sum("otelgpu_config_reload_failures_total", "Configuration reloads rejected", ([], "int", 0)),
    _gauge(
        "otelgpu_source_up",
        "",
        UP,
        ([("source", "nvml")], "float", 1.0),
        ([("source", "containerd")], "float", 0.0),
    ),
    _gauge(
        "otelgpu_source_last_success_timestamp_seconds",
        "s",
        LAST,
        ([("source", "nvml")], "float", 1010.0),
        ([("source", "containerd")], "float", 0.0),
    ),
    _gauge(
        "otelgpu_collection_duration_seconds",
        "s",
        DURATION,
        ([("receiver", "nvml")], "float", 0.25),
    ),
    _gauge(
        "otelgpu_exporter_queue_size",
        "",
        QUEUE,
        ([("exporter", "otlp")], "int", 7),
        ([("exporter", "a_first")], "int", 3),
    ),
    _gauge("otelgpu_build_info", "", BUILD, ([("version", V)], "int", 1)),
    _gauge("otelgpu_config_last_reload_successful", "", RELOAD_OK, ([], "int", 1)),
    _gauge(
        "otelgpu_config_last_reload_success_timestamp_seconds",
        "s",
        RELOAD_TS,
        ([], "float", 1000.0),
    ),
    _gauge("otelgpu_custom_gauge", "", "", ([("a", "2"), ("b", "1")], "float", 2.5)),
]

SECOND: list[Row] = [
    _sum("otelgpu_b_total", "B things", ([("z", "1"), ("a", "2")], "int", 5)),
    _sum("otelgpu_receiver_points_total", "Points produced", ([("receiver", "nvml")], "int", 10)),
    _sum("otelgpu_config_reload_failures_total", "Configuration reloads rejected", ([], "int", 1)),
    _gauge("otelgpu_source_up", "", UP, ([("source", "nvml")], "float", 1.0)),
    _gauge(
        "otelgpu_source_last_success_timestamp_seconds",
        "s",
        LAST,
        ([("source", "nvml")], "float", 1010.0),
    ),
    _gauge(
        "otelgpu_collection_duration_seconds",
        "s",
        DURATION,
        ([("receiver", "nvml")], "float", 0.25),
    ),
    _gauge("otelgpu_exporter_queue_size", "", QUEUE, ([("exporter", "a_first")], "int", 3)),
    _gauge("otelgpu_build_info", "", BUILD, ([("version", V)], "int", 1)),
    _gauge("otelgpu_config_last_reload_successful", "", RELOAD_OK, ([], "int", 0)),
    _gauge(
        "otelgpu_config_last_reload_success_timestamp_seconds",
        "s",
        RELOAD_TS,
        ([], "float", 1000.0),
    ),
    _gauge("otelgpu_custom_gauge", "", "", ([("a", "2"), ("b", "1")], "float", 2.5)),
    _sum("otelgpu_exporter_sent_points_total", "Points sent", ([("exporter", "otlp")], "int", 10)),
    _sum(
        "otelgpu_exporter_failed_points_total",
        "Points dropped",
        ([("exporter", "prometheus")], "int", 4),
    ),
    _sum(
        "otelgpu_enrichment_unmatched_points_total",
        "Points an enrichment processor could not label, by reason and device (hw_id)",
        ([("processor", "k8s_attributes"), ("reason", "no_pod"), ("hw_id", "")], "int", 2),
    ),
    _sum(
        "otelgpu_consumer_failed_points_total",
        "Points lost because a consumer raised",
        ([("consumer", "batch")], "int", 1),
    ),
    _gauge(
        "otelgpu_pod_resources_snapshot_age_seconds",
        "s",
        AGE,
        ([("processor", "k8s_attributes")], "float", 1.5),
    ),
    _gauge("otelgpu_nan_gauge", "", "", ([("x", "1")], "int", 4)),
]

# A series that comes back keeps the place it first had; a gauge with no finite value is left
# out of the collection altogether.
THIRD: list[Row] = [
    *SECOND[:6],
    _gauge(
        "otelgpu_exporter_queue_size",
        "",
        QUEUE,
        ([("exporter", "otlp")], "int", 9),
        ([("exporter", "a_first")], "int", 3),
    ),
    *SECOND[7:10],
    *SECOND[11:],
]


def _ticks() -> Any:
    ticks = iter(range(1000, 100_000, 10))
    return lambda: float(next(ticks))


def test_a_fixed_sequence_of_calls_collects_as_recorded() -> None:
    t = SelfTelemetry(clock=_ticks(), instruments=TABLE)
    created = time.time_ns()
    t.count("otelgpu_b_total", 3, z="1", a="2")
    created_after = time.time_ns()
    t.count("otelgpu_b_total", 2, a="2", z="1")
    t.count("otelgpu_b_total", 0, z="0", a="zero adds nothing")
    t.count("otelgpu_b_total", -1, z="-1", a="negative adds nothing")
    t.count("otelgpu_zero_total", 0)
    t.count("otelgpu_nan_total", math.nan)  # type: ignore[arg-type]
    t.receiver_points("nvml", 5)
    t.config_loaded(True)
    t.register_source("nvml")
    t.source_ok("nvml")
    t.source_failed("containerd", "dial unix: no such file")
    t.set_gauge("otelgpu_exporter_queue_size", 7, exporter="otlp")
    t.set_gauge("otelgpu_custom_gauge", 2.5, b="1", a="2")
    t.set_gauge("otelgpu_exporter_queue_size", 3, exporter="a_first")
    t.set_gauge("otelgpu_nan_gauge", math.nan, x="1")
    t.collection_duration("nvml", 0.25)
    first, rows = _collect(t)
    assert rows == FIRST
    assert created <= _starts(first)[("otelgpu_b_total", (("z", "1"), ("a", "2")))] <= created_after

    t.remove_gauge("otelgpu_exporter_queue_size", exporter="otlp")
    t.exporter_result("otlp", 10, 0)
    t.exporter_result("prometheus", 0, 4)
    t.unmatched_points("k8s_attributes", 2, "no_pod")
    t.consumer_failed("batch", 1)
    t.config_loaded(False)
    t.receiver_points("nvml", 5)
    t.set_gauge("otelgpu_pod_resources_snapshot_age_seconds", 1.5, processor="k8s_attributes")
    t.open_source_claims()
    t.register_source("nvml")
    assert t.retire_unclaimed_sources() == ["containerd"]
    t.set_gauge("otelgpu_nan_gauge", 4, x="1")
    assert _collect(t)[1] == SECOND

    t.set_gauge("otelgpu_exporter_queue_size", 9, exporter="otlp")
    t.set_gauge("otelgpu_custom_gauge", math.inf, b="1", a="2")
    third, rows = _collect(t)
    assert rows == THIRD
    # Cumulative sums keep the start time of their first increment.
    starts = _starts(third)
    assert len(starts) == 7 and all(starts[k] == v for k, v in _starts(first).items())
    assert t.sources_not_ready() == []

    t.shutdown()
    t.count("otelgpu_b_total", 1, a="2", z="1")
    assert _collect(t)[1][0] == _sum(
        "otelgpu_b_total", "B things", ([("z", "1"), ("a", "2")], "int", 6)
    )
    t.shutdown()  # idempotent


def test_a_fresh_agent_reports_only_its_build() -> None:
    assert _collect(SelfTelemetry())[1] == [
        _gauge("otelgpu_build_info", "", BUILD, ([("version", V)], "int", 1))
    ]


def test_a_metric_name_outside_the_otel_syntax_is_a_bug_and_raises() -> None:
    with pytest.raises(ValueError, match="bad name!"):
        SelfTelemetry(instruments=(counter("bad name!", "described"),))


def test_increments_from_many_threads_during_collections_are_all_counted() -> None:
    t = SelfTelemetry(instruments=TABLE)
    threads, per_thread = 8, 5_000
    stop = threading.Event()

    def work(i: int) -> None:
        for _ in range(per_thread):
            t.count("otelgpu_shared_total", 1, worker="all")
            t.count("otelgpu_own_total", 2, worker=str(i))

    def read() -> None:
        while not stop.is_set():
            t.collect()

    reader = threading.Thread(target=read)
    reader.start()
    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    reader.join()
    metrics = {m.name: m for m in t.collect().metrics}
    shared = metrics["otelgpu_shared_total"].points
    assert [(p.attributes, p.value) for p in shared] == [({"worker": "all"}, threads * per_thread)]
    own = {p.attributes["worker"]: p.value for p in metrics["otelgpu_own_total"].points}
    assert own == {str(i): 2 * per_thread for i in range(threads)}
