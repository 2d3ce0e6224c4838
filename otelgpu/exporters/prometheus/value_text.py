"""A family target (where one metric's points go) and how a sample's value is written there.

The value's text is Go's spelling, as the Prometheus text formats have it: integers whole,
finite floats by their shortest round-trip text, `NaN`, `+Inf` and `-Inf`. A target may scale
the value to another unit, print it whole or with six decimals (dcgm-exporter's `%d` and `%f`),
or take it from a point attribute instead (dcgm's XID field, whose value is the XID code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from otelgpu.exporters.prometheus.series import FamilyType
from otelgpu.pdata.model import Attributes


@dataclass(frozen=True, slots=True)
class Target:
    """Where the points of one metric go: family name, type, help, and how a value is written
    (times `scale`, rounded when `integer`, six decimals when `fixed`, or the point attribute
    `value_from` instead)."""

    name: str
    type: FamilyType
    help: str
    scale: float = 1.0
    drop: str = ""  # an attribute not rendered as a label (the one that chose a dcgm field)
    integer: bool = False
    value_from: str = ""
    fixed: bool = False
    # Whether values are written as they come (no scale, rounding or substitution).
    plain: bool = field(init=False)

    def __post_init__(self) -> None:
        plain = self.scale == 1.0 and not (self.integer or self.value_from or self.fixed)
        object.__setattr__(self, "plain", plain)


def sample_line(value: float, attributes: Attributes, target: Target) -> str:
    """A point's sample text as `target` writes it, with the line's newline (`value_line`'s
    spelling). Raises TypeError, ValueError or OverflowError when the value is not a number."""
    if target.value_from:  # dcgm's XID field: the code is the value
        return value_line(int(attributes.get(target.value_from, 0)))
    if target.scale != 1.0:
        value = value * target.scale
    if target.integer:
        value = round(value)
    elif target.fixed and math.isfinite(value):
        return f"{value:f}\n"
    return value_line(value)


def value_line(value: float) -> str:
    """A sample value as the text format writes it, with the line's newline: the one spelling
    of every store write, general path and replay alike (Go's spelling of NaN and the
    infinities). An int is written whole, a finite float by its shortest round-trip text
    (`repr`), anything else as the float it converts to (a bool is 1.0 or 0.0). Raises
    TypeError, ValueError or OverflowError when the value is not a number (an int too long to
    write is a ValueError)."""
    kind = type(value)
    if kind is float:
        if value - value == 0.0:  # finite (inf - inf and nan - nan are nan)
            return f"{value!r}\n"
        if value != value:
            return "NaN\n"
        return "+Inf\n" if value > 0 else "-Inf\n"
    if kind is int:
        return f"{value!r}\n"
    return value_line(float(value))
