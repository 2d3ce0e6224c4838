"""Each unit word of the OpenTelemetry → Prometheus compatibility spec, the `X/Y` per-units,
a suffix exactly as long as the name, invalid characters in label names, and the exporter's
`namespace` (which leaves the agent's own `otelgpu_*` series as they are)."""

from __future__ import annotations

import pytest

from otelgpu.exporters.prometheus.naming import (
    LABEL_NAME_RE,
    metric_name,
    namespaced,
    replace_invalid,
)
from otelgpu.pdata.model import MetricKind

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


def test_invalid_characters_become_underscores_one_for_one() -> None:
    assert replace_invalid("a.b-c/d é") == "a_b_c_d__"
    assert replace_invalid("ok_1") == "ok_1"


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
    ("name", "valid"),
    [("pod", True), ("_x9", True), ("9x", False), ("a b", False), ("a.b", False), ("", False)],
)
def test_the_label_name_pattern(name: str, valid: bool) -> None:
    assert (LABEL_NAME_RE.match(name) is not None) is valid
