"""Self-telemetry: the one place where components count what they receive, drop and send.

Counters and gauges in the shape of the OpenTelemetry metrics API (monotonic cumulative sums,
last-value gauges), kept here in a few dicts behind a lock per instrument and read straight
into the pipeline's own model, so the Prometheus exporter can serve them beside the GPU series
(or a pull reader of the service on its own endpoint, and the service can push them). Every
instrument is declared in `telemetry_table.py` and created at construction; a name or a label
set that is not declared there is a bug at the call site and raises, while bad values (NaN, a
negative increment, an attribute that is not a scalar) are left out, never raised. The
OpenTelemetry SDK did this before; it cost memory and CPU for nothing this module used, and
the collection keeps the shape it had then (tests/unit/core/test_telemetry_golden.py). Every
empty label must be explainable from these series: a source that is down, points that found
no holder, exports that failed.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from otelgpu import __version__
from otelgpu.component.log_limits import capped
from otelgpu.component.telemetry_table import INSTRUMENTS, Instrument, InstrumentKind, checked
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics

_log = logging.getLogger("otelgpu.telemetry")

_ATTR = (str, int, float, bool)

AttributeValue = str | int | float | bool
_I = TypeVar("_I", "_Counter", "_Gauge")
_GaugeKey = tuple[tuple[str, AttributeValue], ...]


def _point_attributes(attributes: Mapping[str, object]) -> dict[str, AttributeValue]:
    """What a point may carry: scalar values; anything else (None, lists) is left out."""
    return {k: v for k, v in attributes.items() if isinstance(v, _ATTR)}


class _Series:
    __slots__ = ("attributes", "start_time_unix_nano", "value")

    def __init__(self, attributes: dict[str, AttributeValue], value: int | float) -> None:
        self.attributes = attributes
        self.start_time_unix_nano = time.time_ns()  # a cumulative sum starts at its first add
        self.value = value


class _Declared:
    """What every instrument keeps of its row in the table, and its lock."""

    def __init__(self, instrument: Instrument) -> None:
        self.name, self.unit = instrument.name, instrument.unit
        self.description = instrument.description
        self.labels = frozenset(instrument.labels)
        self._lock = threading.Lock()


class _Counter(_Declared):
    """A monotonic cumulative sum: one running total per attribute set."""

    def __init__(self, instrument: Instrument) -> None:
        super().__init__(instrument)
        # Keyed regardless of the attributes' order; the first add's order is the one shown.
        self._series: dict[frozenset[tuple[str, object]], _Series] = {}

    def add(self, value: int | float, attributes: Mapping[str, object]) -> None:
        key = frozenset(attributes.items())
        with self._lock:
            series = self._series.get(key)
            if series is None:
                self._series[key] = _Series(_point_attributes(attributes), value)
            else:
                series.value += value

    def read(self, now: int) -> Metric | None:
        with self._lock:
            series = [
                (s.attributes, s.start_time_unix_nano, s.value) for s in self._series.values()
            ]
        if not series:  # just created; its first add is not in yet
            return None
        points = tuple(
            NumberDataPoint(
                attributes=dict(attributes),
                time_unix_nano=now,
                start_time_unix_nano=start,
                value=value,
            )
            for attributes, start, value in series
        )
        return Metric(
            name=self.name,
            unit=self.unit,
            description=self.description,
            kind=MetricKind.SUM,
            monotonic=True,
            points=points,
        )


class _Gauge(_Declared):
    """The last value set per attribute set; a removed or non-finite one is not reported."""

    def __init__(self, instrument: Instrument) -> None:
        super().__init__(instrument)
        self._values: dict[_GaugeKey, float] = {}
        # Attribute sets in the order they were first reported: one that goes and comes back
        # keeps its place among the points.
        self._reported: dict[_GaugeKey, None] = {}

    def set(self, key: _GaugeKey, value: float) -> None:
        with self._lock:
            self._values[key] = value

    def remove(self, key: _GaugeKey) -> None:
        with self._lock:
            self._values.pop(key, None)

    def has_value(self) -> bool:
        with self._lock:
            return any(math.isfinite(v) for v in self._values.values())

    def read(self, now: int) -> Metric | None:
        with self._lock:
            values = {k: v for k, v in self._values.items() if math.isfinite(v)}
            for key in values:
                self._reported.setdefault(key, None)
            series = [(key, values[key]) for key in self._reported if key in values]
        if not series:
            return None
        points = tuple(
            NumberDataPoint(
                attributes=_point_attributes(dict(key)), time_unix_nano=now, value=value
            )
            for key, value in series
        )
        return Metric(
            name=self.name,
            unit=self.unit,
            description=self.description,
            kind=MetricKind.GAUGE,
            points=points,
        )


@dataclass
class SourceState:
    """What the agent knows about one outside source (nvml, pod_resources, containerd...)."""

    up: bool = False
    last_success: float = 0.0
    last_error: str = ""


class SelfTelemetry:
    """Counters and gauges about the agent itself, shared by every component.

    Thread-safe: NVML worker threads and parse threads report through it too (a lock per
    instrument; one for the set of instruments). Construction creates every instrument of
    `instruments` (the agent's table; tests add their own), does no I/O and starts no thread;
    `collect` is the single read path.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        instruments: Iterable[Instrument] = INSTRUMENTS,
    ) -> None:
        self._now = clock
        self._lock = threading.Lock()
        self._counters: dict[str, _Counter] = {}
        self._gauges: dict[str, _Gauge] = {}  # in the order they were declared
        for instrument in map(checked, instruments):
            if instrument.name in self._counters or instrument.name in self._gauges:
                raise ValueError(f"self-telemetry metric {instrument.name!r} is declared twice")
            if instrument.kind is InstrumentKind.COUNTER:
                self._counters[instrument.name] = _Counter(instrument)
            else:
                self._gauges[instrument.name] = _Gauge(instrument)
        # Instruments in the order they first had something to report: the order of a
        # collection (a counter at its first add, a gauge at the first collection that sees it).
        self._reporting: dict[int, _Counter | _Gauge] = {}
        self._pulled = False  # a pull reader of the service serves these (`pulled_apart`)
        self.sources: dict[str, SourceState] = {}
        self._claims: set[str] | None = None  # sources the starting service registered
        self.set_gauge("otelgpu_build_info", 1, version=__version__)

    # --- counting -------------------------------------------------------------------------

    def count(self, name: str, value: int, **attributes: str) -> None:
        """Adds `value` to the declared counter `name`, for the series of these attributes
        (exactly its declared labels). A value that is not a positive number adds nothing."""
        counter = self._declared(self._counters, name, attributes)
        if 0 < value < math.inf:  # also false for NaN
            self._add(counter, value, attributes)

    def _add(self, counter: _Counter, value: int, attributes: Mapping[str, object]) -> None:
        if id(counter) not in self._reporting:  # its first add: it joins the collection order
            with self._lock:
                self._reporting.setdefault(id(counter), counter)
        counter.add(value, attributes)

    def config_loaded(self, ok: bool) -> None:
        """A configuration was applied (`ok`: at start or by a reload) or a reload was
        rejected (invalid, failed to load or to start), which leaves the previous one running."""
        if ok:
            self.set_gauge("otelgpu_config_last_reload_successful", 1)
            self.set_gauge("otelgpu_config_last_reload_success_timestamp_seconds", self._now())
        else:
            self.set_gauge("otelgpu_config_last_reload_successful", 0)
        # Added even when 0, so the series exists from the start and increase() sees the first.
        failures = self._declared(self._counters, "otelgpu_config_reload_failures_total", {})
        self._add(failures, 0 if ok else 1, {})

    def receiver_points(self, receiver: str, n: int) -> None:
        """Points a receiver produced in one collection."""
        self.count("otelgpu_receiver_points_total", n, receiver=receiver)

    def unmatched_points(self, processor: str, n: int, reason: str, device: object = "") -> None:
        """Points an enrichment processor could not label, why, and whose: `hw_id` is the GPU
        or MIG instance the points describe ("" for a resource that is no GPU's), so the
        reason one GPU is unlabelled can be read off its own series (bounded by the node's
        devices)."""
        self.count(
            "otelgpu_enrichment_unmatched_points_total",
            n,
            processor=processor,
            reason=reason,
            hw_id="" if device is None else str(device),
        )

    def exporter_result(self, exporter: str, sent: int, failed: int) -> None:
        """Points an exporter delivered, and points it gave up on."""
        self.count("otelgpu_exporter_sent_points_total", sent, exporter=exporter)
        self.count("otelgpu_exporter_failed_points_total", failed, exporter=exporter)

    def consumer_failed(self, consumer: str, points: int) -> None:
        """A consumer raised instead of taking a batch (a bug); its points are lost."""
        self.count("otelgpu_consumer_failed_points_total", points, consumer=consumer)

    # --- gauges ---------------------------------------------------------------------------

    def set_gauge(self, name: str, value: float, **attributes: str) -> None:
        """Sets the current value of the declared gauge `name` for these attributes (exactly
        its declared labels)."""
        gauge = self._declared(self._gauges, name, attributes)
        gauge.set(tuple(sorted(attributes.items())), value)

    def remove_gauge(self, name: str, **attributes: str) -> None:
        """Forgets the series of gauge `name` with these attributes (its subject is gone)."""
        gauge = self._declared(self._gauges, name, attributes)
        gauge.remove(tuple(sorted(attributes.items())))

    def collection_duration(self, receiver: str, seconds: float) -> None:
        """How long one collection of `receiver` took."""
        self.set_gauge("otelgpu_collection_duration_seconds", seconds, receiver=receiver)

    def _declared(
        self, instruments: Mapping[str, _I], name: str, attributes: Mapping[str, object]
    ) -> _I:
        """The instrument `name` of that kind; raises when the table does not declare it with
        exactly these label names (a bug at the call site, never bad data)."""
        instrument = instruments.get(name)
        if instrument is not None and attributes.keys() == instrument.labels:
            return instrument
        kind = "counter" if instruments is self._counters else "gauge"
        if instrument is None:
            raise ValueError(
                f"self-telemetry {kind} {name!r} is not declared "
                "(otelgpu/component/telemetry_table.py)"
            )
        raise ValueError(
            f"self-telemetry {kind} {name!r} takes the labels {sorted(instrument.labels)}, "
            f"not {sorted(attributes)}"
        )

    # --- sources --------------------------------------------------------------------------

    def register_source(self, source: str) -> None:
        """Declares a source the agent depends on: down until it first answers. A source
        registered again (by the same component after a reload) keeps its state."""
        with self._lock:
            if source not in self.sources:
                self.sources[source] = SourceState()
            if self._claims is not None:
                self._claims.add(source)
        self._publish(source)

    def open_source_claims(self) -> None:
        """A service is starting: its components will register the sources they use."""
        with self._lock:
            self._claims = set()

    def retire_unclaimed_sources(self) -> list[str]:
        """The service has started: sources no component registered (those of components a
        reload removed) leave readiness and the source gauges. Returns their names."""
        with self._lock:
            claims, self._claims = self._claims, None
            if claims is None:
                return []
            gone = sorted(set(self.sources) - claims)
            for source in gone:
                del self.sources[source]
        for source in gone:
            self.remove_gauge("otelgpu_source_up", source=source)
            self.remove_gauge("otelgpu_source_last_success_timestamp_seconds", source=source)
        return gone

    def source_ok(self, source: str) -> None:
        """The source answered. Logs once when it comes back."""
        state = self._state(source)
        if not state.up and state.last_error:
            _log.info("source %s is up again", source)
        state.up, state.last_success, state.last_error = True, self._now(), ""
        self._publish(source)

    def source_failed(self, source: str, reason: str) -> None:
        """The source did not answer. Logs once per state change, never per cycle; the
        reason (often the peer's own text) is capped in length in the log and in /readyz."""
        reason = capped(reason)
        state = self._state(source)
        if state.up or not state.last_error:
            _log.warning("source %s is down: %s", source, reason)
        state.up, state.last_error = False, reason
        self._publish(source)

    def _state(self, source: str) -> SourceState:
        if source not in self.sources:
            self.register_source(source)
        return self.sources[source]

    def _publish(self, source: str) -> None:
        state = self.sources[source]
        self.set_gauge("otelgpu_source_up", 1.0 if state.up else 0.0, source=source)
        self.set_gauge(
            "otelgpu_source_last_success_timestamp_seconds", state.last_success, source=source
        )

    def sources_not_ready(self) -> list[str]:
        """Sources that have never answered, with their last error."""
        return [
            f"{name}: {state.last_error or 'no answer yet'}"
            for name, state in sorted(self.sources.items())
            if state.last_success == 0.0
        ]

    # --- reading --------------------------------------------------------------------------

    def pulled_apart(self, pulled: bool) -> None:
        """Whether a pull reader of the service (`service::telemetry::metrics::readers`)
        serves these metrics on an endpoint of its own. While it does, `collect()` (what every
        Prometheus exporter reads to serve them beside its series) is empty, and the reader
        and the push read with `collect(reader=True)`."""
        self._pulled = pulled

    def collect(self, *, reader: bool = False) -> ResourceMetrics:
        """Reads every instrument into the pipeline's model (one resource: the agent); for a
        Prometheus exporter (not a `reader` of the service) nothing while a pull reader serves
        them apart (`pulled_apart`).

        Metrics come in the order their instruments first had something to report, points
        in the order their attribute sets first appeared; all carry one collection time.
        """
        if self._pulled and not reader:
            return ResourceMetrics(resource={}, metrics=(), scope="otelgpu.telemetry")
        with self._lock:
            for gauge in self._gauges.values():
                if id(gauge) not in self._reporting and gauge.has_value():
                    self._reporting[id(gauge)] = gauge
            instruments = list(self._reporting.values())
        now = time.time_ns()
        metrics = tuple(m for m in (i.read(now) for i in instruments) if m is not None)
        resource: dict[str, str | int | float | bool] = (
            {"service.name": "otelgpu", "service.version": __version__} if metrics else {}
        )
        return ResourceMetrics(resource=resource, metrics=metrics, scope="otelgpu.telemetry")

    def shutdown(self) -> None:
        """Nothing to release (no threads, no exporters of its own); kept for the service's
        lifecycle and idempotent. A collection after it still reads every instrument."""
