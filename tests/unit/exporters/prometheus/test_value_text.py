"""A family target's defaults and a value's text (value_text.py): the scale, rounding and XID
substitution each alone, and Go's spelling of every kind of value."""

from __future__ import annotations

import math

import pytest

from otelgpu.exporters.prometheus.value_text import Target, sample_line, value_line


def test_a_target_writes_values_as_they_come_by_default() -> None:
    target = Target("hw_power_watts", "gauge", "h")
    assert (target.scale, target.drop, target.integer, target.value_from) == (1.0, "", False, "")
    assert target.plain


@pytest.mark.parametrize(
    "target",
    [
        Target("a", "gauge", "h", scale=2.0),
        Target("a", "gauge", "h", integer=True),
        Target("a", "gauge", "h", value_from="xid"),
    ],
)
def test_a_scaled_rounded_or_substituted_target_is_not_plain(target: Target) -> None:
    assert not target.plain


def test_an_unscaled_value_keeps_its_type() -> None:
    plain = Target("a", "gauge", "h")
    assert sample_line(7, {}, plain) == "7\n"
    assert sample_line(2.5, {}, plain) == "2.5\n"


def test_a_scaled_value_is_multiplied() -> None:
    assert sample_line(3, {}, Target("a", "gauge", "h", scale=0.5)) == "1.5\n"


def test_an_integer_target_rounds() -> None:
    assert sample_line(2.6, {}, Target("a", "gauge", "h", integer=True)) == "3\n"
    assert sample_line(2.6, {}, Target("a", "gauge", "h")) == "2.6\n"


def test_a_scaled_integer_target_scales_then_rounds() -> None:
    target = Target("a", "gauge", "h", scale=1 / 1048576, integer=True)
    assert sample_line(3 * 1048576 + 1, {}, target) == "3\n"


def test_the_value_from_an_attribute_replaces_the_point_value() -> None:
    target = Target("DCGM_FI_DEV_XID_ERRORS", "gauge", "h", value_from="xid")
    assert sample_line(1.0, {"xid": 79}, target) == "79\n"
    assert sample_line(1.0, {}, target) == "0\n"  # no code on the point: 0, as dcgm-exporter


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (2**70, "1180591620717411303424"),
        (-3, "-3"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (math.nan, "NaN"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
    ],
)
def test_values_are_written_in_go_spelling(value: float, text: str) -> None:
    assert value_line(value) == text + "\n"
