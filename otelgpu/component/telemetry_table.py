"""Every self-telemetry instrument of the agent, declared once: name, type, unit, description
and the label names each series carries.

`SelfTelemetry` creates these at construction and refuses anything else: counting or setting
a name that is not here, or with other label names, raises (a bug at the call site, which
`tests/unit/core/test_telemetry_table.py` finds by reading every call in `otelgpu/`). A new
counter or gauge is one row here, and its call site names it and its labels.

The names are served as they are on `/metrics` (the translation adds no suffix), so a counter
ends in `_total` and a duration in `_seconds`. Gauges are listed in the order a collection
shows those it sees for the first time together; counters join a collection at their first
add, in that order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

# Names and label names are served on /metrics as they are: an OpenTelemetry instrument name
# that is also a Prometheus metric name (lowercase), and Prometheus label names.
_NAME = re.compile(r"[a-z][a-z0-9_]{0,254}")
_LABEL = re.compile(r"[a-z_][a-z0-9_]*")


class InstrumentKind(Enum):
    COUNTER = "counter"  # a monotonic cumulative sum, one running total per label set
    GAUGE = "gauge"  # the last value set per label set


@dataclass(frozen=True, slots=True)
class Instrument:
    """One declared instrument: every series of it carries exactly `labels`."""

    name: str
    kind: InstrumentKind
    description: str
    labels: tuple[str, ...] = ()
    unit: str = ""


def checked(instrument: Instrument) -> Instrument:
    """`instrument`, or ValueError when its name or label names cannot be served as they are."""
    if _NAME.fullmatch(instrument.name) is None:
        raise ValueError(
            f"self-telemetry metric name {instrument.name!r} is not a lowercase OpenTelemetry "
            "instrument name (a letter, then up to 254 letters, digits or _)"
        )
    bad = [label for label in instrument.labels if _LABEL.fullmatch(label) is None]
    if bad or len(set(instrument.labels)) != len(instrument.labels):
        raise ValueError(f"self-telemetry metric {instrument.name!r}: bad label names {bad}")
    return instrument


def counter(name: str, description: str, *labels: str) -> Instrument:
    return Instrument(name, InstrumentKind.COUNTER, description, labels)


def gauge(name: str, description: str, *labels: str, unit: str = "") -> Instrument:
    return Instrument(name, InstrumentKind.GAUGE, description, labels, unit)


INSTRUMENTS: tuple[Instrument, ...] = (
    # --- gauges ---------------------------------------------------------------------------
    gauge("otelgpu_source_up", "1 if the source answered its last request, 0 if not", "source"),
    gauge(
        "otelgpu_source_last_success_timestamp_seconds",
        "Unix time of the source's last success",
        "source",
        unit="s",
    ),
    gauge(
        "otelgpu_collection_duration_seconds",
        "How long the receiver's last collection took",
        "receiver",
        unit="s",
    ),
    gauge(
        "otelgpu_exporter_queue_size",
        "What waits in the sending queue, in its sizer's unit: bytes as held "
        "(points with sizer: items, batches with sizer: requests)",
        "exporter",
    ),
    gauge("otelgpu_build_info", "Always 1; the agent's version as a label", "version"),
    gauge(
        "otelgpu_pod_resources_snapshot_age_seconds",
        "Age of the pod-resources snapshot in use",
        "processor",
        unit="s",
    ),
    gauge(
        "otelgpu_config_last_reload_successful",
        "1 if the last configuration reload (SIGHUP) was applied, 0 if it was rejected",
    ),
    gauge(
        "otelgpu_config_last_reload_success_timestamp_seconds",
        "Unix time the running configuration was loaded (at start or by a reload)",
        unit="s",
    ),
    gauge(
        "otelgpu_prometheus_series", "Series the prometheus exporter holds (and serves)", "exporter"
    ),
    gauge(
        "otelgpu_container_env_snapshot_age_seconds",
        "Age of the runtime snapshot container_env labels from "
        "(it grows while the runtime is down)",
        "processor",
        "runtime",
        unit="s",
    ),
    gauge(
        "otelgpu_container_env_containers",
        "Workload containers in the latest snapshot of the runtime",
        "processor",
        "runtime",
    ),
    gauge(
        "otelgpu_gpu_processes_outside_allocation",
        "GPU processes running outside every allocation of their GPU (in a container the "
        "kubelet did not give the GPU to, or on the host)",
        "processor",
    ),
    # --- the pipelines' flow --------------------------------------------------------------
    counter("otelgpu_receiver_points_total", "Points produced", "receiver"),
    counter("otelgpu_receiver_scrape_errors_total", "Collections that failed", "receiver"),
    counter(
        "otelgpu_enrichment_unmatched_points_total",
        "Points an enrichment processor could not label, by reason and device (hw_id)",
        "processor",
        "reason",
        "hw_id",
    ),
    counter(
        "otelgpu_processor_filtered_points_total",
        "Points a filter processor dropped on purpose",
        "processor",
    ),
    counter(
        "otelgpu_processor_failed_points_total",
        "Points lost because a processor raised",
        "processor",
    ),
    counter(
        "otelgpu_consumer_failed_points_total", "Points lost because a consumer raised", "consumer"
    ),
    counter("otelgpu_exporter_sent_points_total", "Points sent", "exporter"),
    counter("otelgpu_exporter_failed_points_total", "Points dropped", "exporter"),
    counter("otelgpu_config_reload_failures_total", "Configuration reloads rejected"),
    # --- receivers ------------------------------------------------------------------------
    counter(
        "otelgpu_nvml_read_errors_total",
        "NVML reads that failed with an unexpected error",
        "receiver",
        "source",
    ),
    counter(
        "otelgpu_nvml_unknown_devices_total",
        "Entries of the nvml receiver's devices list that matched no GPU when it opened",
        "receiver",
        "device",
    ),
    counter(
        "otelgpu_kubelet_gaps_total",
        "Kubelet summary entries that yield no series or series missing a label, by reason",
        "receiver",
        "entity",
        "reason",
    ),
    counter(
        "otelgpu_kubelet_missed_pods_total",
        "Pods the kubelet's pod-resources API lists that its stats summary misses, per read, "
        "by reason",
        "receiver",
        "reason",
    ),
    counter(
        "otelgpu_kubelet_errors_total",
        "Failed kubelet summary requests, by reason",
        "receiver",
        "reason",
    ),
    # --- processors -----------------------------------------------------------------------
    counter(
        "otelgpu_pod_resources_refreshes_total", "Pod-resources refreshes", "processor", "trigger"
    ),
    counter(
        "otelgpu_pod_resources_errors_total", "Failed pod-resources refreshes", "processor", "code"
    ),
    counter(
        "otelgpu_dra_devices_unmapped_total",
        "NVIDIA DRA claim devices that could not be mapped to a GPU, per batch",
        "processor",
        "reason",
    ),
    counter(
        "otelgpu_container_env_refused_keys_total",
        "Included keys not exported: secret-like or unsafe keys, credential-like values, "
        "values of glob-matched keys that are not plainly safe",
        "processor",
        "section",
        "reason",
    ),
    counter(
        "otelgpu_container_env_truncated_values_total",
        "Values cut to max_value_length",
        "processor",
    ),
    counter(
        "otelgpu_container_env_dropped_attributes_total",
        "Attributes left out by max_attributes",
        "processor",
    ),
    counter(
        "otelgpu_container_env_invalid_records_total",
        "Runtime records that could not be fully decoded",
        "processor",
        "runtime",
        "reason",
    ),
    counter(
        "otelgpu_hpc_jobs_errors_total",
        "Problems reading the HPC job-mapping folder",
        "processor",
        "reason",
    ),
    # --- exporters ------------------------------------------------------------------------
    counter(
        "otelgpu_prometheus_scrapes_total",
        "Requests to /metrics, by status code and format negotiated (text, openmetrics)",
        "exporter",
        "code",
        "format",
    ),
    counter(
        "otelgpu_prometheus_expired_series_total", "Series dropped by metric_expiration", "exporter"
    ),
    counter(
        "otelgpu_prometheus_relabelled_series_total",
        "Series removed at once because their device or process reported other labels",
        "exporter",
    ),
    counter(
        "otelgpu_prometheus_truncated_label_values_total",
        "Label values cut to 1024 characters",
        "exporter",
    ),
)
