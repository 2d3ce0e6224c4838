"""The latest value of every series, grouped in metric families, with expiry.

A series is keyed by its whole line prefix (`name{labels} `), so two data points that render to
the same name and labels are one series (the later value wins): the body never holds a
duplicate series, whatever attribute collisions the translation had to resolve. Values are
stored already formatted, so rendering a body is only string joins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(slots=True)
class Family:
    """One metric family: name, Prometheus type, help text, and its series."""

    name: str
    type: str  # "gauge" | "counter"
    help: str
    # line prefix `name{labels} ` → (`value\n`, monotonic time of the last update)
    series: dict[str, tuple[str, float]] = field(default_factory=dict)


class SeriesStore:
    """Families by name. Not thread-safe: the exporter's event loop owns it."""

    def __init__(self) -> None:
        self.families: dict[str, Family] = {}

    def family(self, name: str, type_: str, help_: str) -> Family | None:
        """The family `name`, created on first use; None when it exists with another type
        (two OTel metrics that translate to one name: the first one keeps it)."""
        found = self.families.get(name)
        if found is None:
            found = self.families[name] = Family(name, type_, help_)
        elif found.type != type_:
            return None
        return found

    def expire(self, now: float, max_age: float) -> int:
        """Drops series not updated for `max_age` seconds (and emptied families); how many."""
        cutoff = now - max_age
        dropped = 0
        for name in list(self.families):
            series = self.families[name].series
            stale = [key for key, (_, updated) in series.items() if updated < cutoff]
            for key in stale:
                del series[key]
            dropped += len(stale)
            if not series:
                del self.families[name]
        return dropped

    def series_count(self) -> int:
        """How many series the next body will hold (self-telemetry aside)."""
        return sum(len(f.series) for f in self.families.values())


def format_value(value: float) -> str:
    """A sample value as the text format writes it (Go's spelling of NaN and infinities)."""
    if type(value) is int:
        return str(value)
    number = float(value)
    if math.isfinite(number):
        return repr(number)
    if math.isnan(number):
        return "NaN"
    return "+Inf" if number > 0 else "-Inf"
