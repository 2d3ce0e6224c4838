"""Self-telemetry: the one place where components count what they receive, drop and send.

Instrumented with the OpenTelemetry SDK's metrics API, the way the Collector instruments
itself, and read back into the pipeline's own model so the Prometheus exporter can serve it
beside the GPU series (and the service can push it). Every empty label must be explainable
from these series: a source that is down, points that found no holder, exports that failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry.metrics import CallbackOptions, Counter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge as SdkGauge
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.metrics.export import Sum as SdkSum
from opentelemetry.sdk.resources import Resource

from otelgpu import __version__
from otelgpu.log_limits import capped
from otelgpu.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics

_log = logging.getLogger("otelgpu.telemetry")

# Gauges the SPEC names, with their descriptions; values live in `_gauges` and are observed
# by the SDK at collection time.
_GAUGES = {
    "otelgpu_source_up": "1 if the source answered its last request, 0 if not",
    "otelgpu_source_last_success_timestamp_seconds": "Unix time of the source's last success",
    "otelgpu_collection_duration_seconds": "How long the receiver's last collection took",
    "otelgpu_exporter_queue_size": "Points (or batches, with sizer: requests) waiting to be sent",
    "otelgpu_build_info": "Always 1; the agent's version as a label",
    "otelgpu_pod_resources_snapshot_age_seconds": "Age of the pod-resources snapshot in use",
    "otelgpu_config_last_reload_successful": (
        "1 if the last configuration reload (SIGHUP) was applied, 0 if it was rejected"
    ),
    "otelgpu_config_last_reload_success_timestamp_seconds": (
        "Unix time the running configuration was loaded (at start or by a reload)"
    ),
    "otelgpu_prometheus_series": "Series the prometheus exporter holds (and serves)",
    "otelgpu_gpu_processes_outside_allocation": (
        "GPU processes running outside every allocation of their GPU (in a container the "
        "kubelet did not give the GPU to, or on the host)"
    ),
}
_GAUGE_UNITS = {
    "otelgpu_source_last_success_timestamp_seconds": "s",
    "otelgpu_pod_resources_snapshot_age_seconds": "s",
    "otelgpu_config_last_reload_success_timestamp_seconds": "s",
    "otelgpu_collection_duration_seconds": "s",
}


@dataclass
class SourceState:
    """What the agent knows about one outside source (nvml, pod_resources, containerd...)."""

    up: bool = False
    last_success: float = 0.0
    last_error: str = ""


class SelfTelemetry:
    """Counters and gauges about the agent itself, shared by every component.

    Thread-safe: NVML worker threads report through it too. Construction builds only the
    SDK objects (no I/O, no threads); `collect` is the single read path.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._now = clock
        self._lock = threading.Lock()
        self._reader = InMemoryMetricReader()
        self._provider = MeterProvider(
            metric_readers=[self._reader],
            resource=Resource({"service.name": "otelgpu", "service.version": __version__}),
            shutdown_on_exit=False,
        )
        self._meter = self._provider.get_meter("otelgpu", __version__)
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        self._descriptions: dict[str, str] = {}
        self.sources: dict[str, SourceState] = {}
        self._claims: set[str] | None = None  # sources the starting service registered
        for name, description in _GAUGES.items():
            self._declare_gauge(name, description, _GAUGE_UNITS.get(name, ""))
        self.set_gauge("otelgpu_build_info", 1, version=__version__)

    # --- counting -------------------------------------------------------------------------

    def count(self, name: str, value: int, description: str = "", **attributes: str) -> None:
        """Adds `value` to the monotonic counter `name` (created on first use)."""
        if value <= 0:
            return
        self._counter(name, description).add(value, attributes)

    def config_loaded(self, ok: bool) -> None:
        """A configuration was applied (`ok`: at start or by a reload) or a reload was
        rejected (invalid, failed to load or to start), which leaves the previous one running."""
        if ok:
            self.set_gauge("otelgpu_config_last_reload_successful", 1)
            self.set_gauge("otelgpu_config_last_reload_success_timestamp_seconds", self._now())
        else:
            self.set_gauge("otelgpu_config_last_reload_successful", 0)
        # Added even when 0, so the series exists from the start and increase() sees the first.
        self._counter("otelgpu_config_reload_failures_total", "Configuration reloads rejected").add(
            0 if ok else 1
        )

    def _counter(self, name: str, description: str) -> Counter:
        counter = self._counters.get(name)
        if counter is None:
            with self._lock:
                counter = self._counters.get(name)
                if counter is None:
                    counter = self._meter.create_counter(name, description=description)
                    self._counters[name] = counter
        return counter

    def receiver_points(self, receiver: str, n: int) -> None:
        """Points a receiver produced in one collection."""
        self.count("otelgpu_receiver_points_total", n, "Points produced", receiver=receiver)

    def unmatched_points(self, processor: str, n: int, reason: str) -> None:
        """Points an enrichment processor could not label, and why."""
        self.count(
            "otelgpu_enrichment_unmatched_points_total",
            n,
            "Points an enrichment processor could not label",
            processor=processor,
            reason=reason,
        )

    def exporter_result(self, exporter: str, sent: int, failed: int) -> None:
        """Points an exporter delivered, and points it gave up on."""
        self.count("otelgpu_exporter_sent_points_total", sent, "Points sent", exporter=exporter)
        self.count(
            "otelgpu_exporter_failed_points_total", failed, "Points dropped", exporter=exporter
        )

    def consumer_failed(self, consumer: str, points: int) -> None:
        """A consumer raised instead of taking a batch (a bug); its points are lost."""
        self.count(
            "otelgpu_consumer_failed_points_total",
            points,
            "Points lost because a consumer raised",
            consumer=consumer,
        )

    # --- gauges ---------------------------------------------------------------------------

    def set_gauge(self, name: str, value: float, **attributes: str) -> None:
        """Sets the current value of gauge `name` for these attributes."""
        series = self._gauges.get(name)
        if series is None:
            self._declare_gauge(name, "", "")
            series = self._gauges[name]
        series[tuple(sorted(attributes.items()))] = value

    def remove_gauge(self, name: str, **attributes: str) -> None:
        """Forgets the series of gauge `name` with these attributes (its subject is gone)."""
        self._gauges.get(name, {}).pop(tuple(sorted(attributes.items())), None)

    def collection_duration(self, receiver: str, seconds: float) -> None:
        """How long one collection of `receiver` took."""
        self.set_gauge("otelgpu_collection_duration_seconds", seconds, receiver=receiver)

    def _declare_gauge(self, name: str, description: str, unit: str) -> None:
        with self._lock:
            if name in self._gauges:
                return
            self._gauges[name] = {}
            series = self._gauges[name]

            def observe(_options: CallbackOptions) -> Iterable[Observation]:
                return [Observation(v, dict(k)) for k, v in list(series.items())]

            self._meter.create_observable_gauge(
                name, callbacks=[observe], description=description, unit=unit
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
            for gauge in ("otelgpu_source_up", "otelgpu_source_last_success_timestamp_seconds"):
                self.remove_gauge(gauge, source=source)
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

    def collect(self) -> ResourceMetrics:
        """Reads every instrument into the pipeline's model (one resource: the agent)."""
        data = self._reader.get_metrics_data()
        metrics: list[Metric] = []
        resource: dict[str, str | int | float | bool] = {}
        for rm in data.resource_metrics if data else ():
            resource = {k: v for k, v in rm.resource.attributes.items() if isinstance(v, _ATTR)}
            for sm in rm.scope_metrics:
                metrics.extend(_to_metric(m) for m in sm.metrics)
        return ResourceMetrics(resource=resource, metrics=tuple(metrics), scope="otelgpu.telemetry")

    def shutdown(self) -> None:
        """Releases the SDK's resources; idempotent."""
        self._provider.shutdown()


_ATTR = (str, int, float, bool)


def _to_metric(sdk_metric: object) -> Metric:
    data = sdk_metric.data  # type: ignore[attr-defined]
    points = tuple(
        NumberDataPoint(
            attributes={k: v for k, v in (p.attributes or {}).items() if isinstance(v, _ATTR)},
            time_unix_nano=p.time_unix_nano,
            start_time_unix_nano=p.start_time_unix_nano or 0,
            value=p.value,
        )
        for p in data.data_points
    )
    is_sum = isinstance(data, SdkSum)
    assert is_sum or isinstance(data, SdkGauge), f"unexpected SDK data type {type(data)}"
    return Metric(
        name=sdk_metric.name,  # type: ignore[attr-defined]
        unit=sdk_metric.unit or "",  # type: ignore[attr-defined]
        description=sdk_metric.description or "",  # type: ignore[attr-defined]
        kind=MetricKind.SUM if is_sum else MetricKind.GAUGE,
        monotonic=bool(is_sum and data.is_monotonic),
        points=points,
    )
