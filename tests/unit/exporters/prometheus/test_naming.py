"""OTel → Prometheus metric and label names (OpenTelemetry compatibility spec): each unit word,
the `X/Y` per-units, suffixes, invalid characters, and the exporter's `namespace` (which leaves
the agent's own `otelgpu_*` series as they are)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otelgpu.exporters.prometheus.naming import (
    LABEL_NAME_RE,
    metric_name,
    namespaced,
    replace_invalid,
    sanitize_label,
)
from otelgpu.pdata.model import MetricKind

G, S = MetricKind.GAUGE, MetricKind.SUM


@pytest.mark.parametrize(
    ("name", "unit", "kind", "monotonic", "expected"),
    [
        ("hw.gpu.memory.usage", "By", G, False, "hw_gpu_memory_usage_bytes"),
        ("hw.gpu.utilization", "1", G, False, "hw_gpu_utilization_ratio"),
        ("hw.power", "W", G, False, "hw_power_watts"),
        ("hw.energy", "J", S, True, "hw_energy_joules_total"),
        ("hw.temperature", "Cel", G, False, "hw_temperature_celsius"),
        ("nvidia.gpu.sm.clock", "Hz", G, False, "nvidia_gpu_sm_clock_hertz"),
        ("hw.errors", "{error}", S, True, "hw_errors_total"),
        ("nvidia.gpu.pcie.tx.throughput", "By/s", G, False, "nvidia_gpu_pcie_tx_throughput_bytes_per_second"),
        ("nvidia.gpu.nvlink.io", "By", S, True, "nvidia_gpu_nvlink_io_bytes_total"),
        # `1` on a sum adds nothing; a non-monotonic sum is a gauge without _total.
        ("x.count", "1", S, True, "x_count_total"),
        ("x.level", "By", S, False, "x_level_bytes"),
        # Suffixes already present are not repeated.
        ("otelgpu_collection_duration_seconds", "s", G, False, "otelgpu_collection_duration_seconds"),
        ("otelgpu_receiver_points_total", "", S, True, "otelgpu_receiver_points_total"),
        ("request.size.bytes", "By", G, False, "request_size_bytes"),
        ("latency", "ms", G, False, "latency_milliseconds"),
        ("drops", "packets", S, True, "drops_packets_total"),
        # Sanitizing: runs of invalid characters become one underscore, never leading digits.
        ("(lambda).function.executions(#)", "", G, False, "lambda_function_executions"),
        ("9lives", "", G, False, "_9lives"),
    ],
)  # fmt: skip
def test_metric_names(
    name: str, unit: str, kind: MetricKind, monotonic: bool, expected: str
) -> None:
    assert metric_name(name, unit, kind, monotonic) == expected


# UCUM unit → the word the spec gives it (the spec's table, as facts).
UNIT_WORDS = [
    ("d", "days"),
    ("h", "hours"),
    ("min", "minutes"),
    ("s", "seconds"),
    ("ms", "milliseconds"),
    ("us", "microseconds"),
    ("ns", "nanoseconds"),
    ("By", "bytes"),
    ("KiBy", "kibibytes"),
    ("MiBy", "mebibytes"),
    ("GiBy", "gibibytes"),
    ("TiBy", "tibibytes"),
    ("KBy", "kilobytes"),
    ("MBy", "megabytes"),
    ("GBy", "gigabytes"),
    ("TBy", "terabytes"),
    ("m", "meters"),
    ("V", "volts"),
    ("A", "amperes"),
    ("J", "joules"),
    ("W", "watts"),
    ("g", "grams"),
    ("Cel", "celsius"),
    ("Hz", "hertz"),
    ("%", "percent"),
]

PER_WORDS = [
    ("s", "second"),
    ("m", "minute"),
    ("h", "hour"),
    ("d", "day"),
    ("w", "week"),
    ("mo", "month"),
    ("y", "year"),
]


@pytest.mark.parametrize(("unit", "word"), UNIT_WORDS)
def test_each_unit_has_its_word(unit: str, word: str) -> None:
    assert metric_name("x", unit, MetricKind.GAUGE, False) == f"x_{word}"


@pytest.mark.parametrize(("per", "word"), PER_WORDS)
def test_each_per_unit_is_singular(per: str, word: str) -> None:
    assert metric_name("x", f"By/{per}", MetricKind.GAUGE, False) == f"x_bytes_per_{word}"


def test_a_name_that_is_exactly_its_suffix_is_not_doubled() -> None:
    assert metric_name("seconds", "s", MetricKind.GAUGE, False) == "seconds"
    assert metric_name("total", "", MetricKind.SUM, True) == "total"


@pytest.mark.parametrize(
    ("namespace", "name", "expected"),
    [
        ("gpu", "hw_power_watts", "gpu_hw_power_watts"),
        ("", "hw_power_watts", "hw_power_watts"),
        ("gpu", "otelgpu_build_info", "otelgpu_build_info"),
        ("", "otelgpu_build_info", "otelgpu_build_info"),
    ],
)
def test_the_namespace_prefixes_all_but_the_agents_own_series(
    namespace: str, name: str, expected: str
) -> None:
    assert namespaced(namespace, name) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("k8s.pod.name", "k8s_pod_name"),
        ("container.env.TEAM", "container_env_TEAM"),
        ("app.kubernetes.io/name", "app_kubernetes_io_name"),
        ("0day", "key_0day"),
        ("__name__", "key__name__"),
        ("_private", "_private"),
        ("", "key_"),
        ("équipe", "_quipe"),
    ],
)
def test_label_names(key: str, expected: str) -> None:
    assert sanitize_label(key) == expected


def test_invalid_characters_become_underscores_one_for_one() -> None:
    assert replace_invalid("a.b-c/d é") == "a_b_c_d__"
    assert replace_invalid("ok_1") == "ok_1"


@pytest.mark.parametrize(
    ("name", "valid"),
    [("pod", True), ("_x9", True), ("9x", False), ("a b", False), ("a.b", False), ("", False)],
)
def test_the_label_name_pattern(name: str, valid: bool) -> None:
    assert (LABEL_NAME_RE.match(name) is not None) is valid


@given(st.text(max_size=40))
def test_any_key_gives_a_valid_unreserved_label_name(key: str) -> None:
    name = sanitize_label(key)
    assert LABEL_NAME_RE.match(name)
    assert not name.startswith("__")


@given(st.text(max_size=40), st.sampled_from(["", "1", "By", "s", "{x}", "By/s", "ünit"]))
def test_any_metric_name_is_valid(name: str, unit: str) -> None:
    for kind, monotonic in ((G, False), (S, True), (S, False)):
        assert LABEL_NAME_RE.match(metric_name(name, unit, kind, monotonic))
