"""The metric-name reader the rule and dashboard checks rely on, and the label names the
bundle assumes the prometheus exporter produces."""

from __future__ import annotations

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.naming import sanitize_label
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata import semconv
from tests.deploy.names import (
    catalog_names,
    dcgm_names,
    grafana_query,
    known_labels,
    metrics_in,
    self_telemetry_names,
)


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up == 0", {"up"}),
        (
            'max by (a, b) (increase(x_total{c=~"1|2"}[10m]) > 0 or (y unless z offset 10m))',
            {"x_total", "y", "z"},
        ),
        (
            'label_replace(kube_node_labels, "k8s_node_name", "$1", "node", "(.+)") '
            "and on (k8s_node_name) nvidia_gpu_up",
            {"kube_node_labels", "nvidia_gpu_up"},
        ),
        ("a / b > 0.95", {"a", "b"}),
        (
            "x * on (n) group_left (label_a, label_b) otelgpu:info:nodes",
            {"x", "otelgpu:info:nodes"},
        ),
        ('time() - (s{k8s_node_name=~"$node"} > 0)', {"s"}),
        ('sum without (instance) (rate(m{$env_label=~"$env_value"}[$__rate_interval]))', {"m"}),
        ("1e9 + 2", set()),
    ],
)
def test_metrics_in_reads_selected_names(expr: str, names: set[str]) -> None:
    assert metrics_in(expr) == names


def test_grafana_label_values_reads_as_its_selector() -> None:
    assert grafana_query('label_values(m{a="1"}, k8s_pod_name)') == 'm{a="1"}'
    assert grafana_query("label_values(m, $env_label)") == "m"
    assert grafana_query("label_values(k8s_pod_name)") == ""
    assert grafana_query("rate(m[5m])") == "rate(m[5m])"


def test_catalog_translates_to_the_names_the_bundle_uses() -> None:
    # The names the rules and dashboard were written with; a catalog or translation change
    # that renames one of them must be seen here first.
    assert {
        "nvidia_gpu_up",
        "hw_gpu_utilization_ratio",
        "hw_gpu_memory_usage_bytes",
        "nvidia_gpu_memory_free_bytes",
        "nvidia_gpu_memory_reserved_bytes",
        "hw_power_watts",
        "hw_temperature_celsius",
        "nvidia_gpu_memory_busy_ratio",
        "nvidia_gpu_xid_errors_total",
        "hw_errors_total",
        "nvidia_gpu_memory_remapped_rows_total",
        "nvidia_gpu_memory_row_remap_failure",
        "nvidia_gpu_process_memory_usage_bytes",
    } <= catalog_names()


def test_dcgm_translation_gives_the_names_the_dcgm_bundle_uses() -> None:
    # dcgm-exporter's fields for the split metrics, and the otel names of the metrics it has
    # no field for (the exporter keeps those).
    assert {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_ENC_UTIL",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_XID_ERRORS",
        "nvidia_gpu_up",
        "nvidia_gpu_clock_event_active",
        "nvidia_gpu_allocation_ratio",
    } <= dcgm_names()
    assert "hw_temperature_celsius" not in dcgm_names()
    assert "DCGM_FI_DEV_GPU_TEMP" not in catalog_names()


def test_dcgm_labels_are_dcgm_exporters() -> None:
    labels = known_labels("dcgm")
    assert {"UUID", "gpu", "modelName", "Hostname", "pod", "namespace", "GPU_I_ID"} <= labels
    assert {"hw_id", "k8s_node_name", "err_code", "err_msg"} <= labels  # MIG's own UUID: hw_id
    assert "k8s_pod_name" not in labels and "hw_model" not in labels


def test_node_label_is_k8s_node_name() -> None:
    # The ServiceMonitor relabels the node into this name and the recording rules join on it.
    assert sanitize_label(semconv.K8S_NODE_NAME) == "k8s_node_name"


def test_self_telemetry_names_survive_the_exporter_unchanged() -> None:
    """The names found in the code are what /metrics serves (translation adds no suffix)."""
    telemetry = SelfTelemetry(clock=lambda: 1000.0)
    telemetry.source_ok("nvml")
    telemetry.unmatched_points("container_env", 3, "runtime_down")
    telemetry.exporter_result("otlp", 5, 2)
    families = Translator("otel", {}).families(telemetry.collect(), now=0.0)
    served = {family.name for family in families}
    telemetry.shutdown()
    expected = {
        "otelgpu_source_up",
        "otelgpu_source_last_success_timestamp_seconds",
        "otelgpu_enrichment_unmatched_points_total",
        "otelgpu_exporter_failed_points_total",
    }
    assert expected <= served
    assert expected <= self_telemetry_names()
