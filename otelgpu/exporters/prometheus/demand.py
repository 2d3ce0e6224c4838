"""What scrapers want: when each format was last asked for, and what the next body is made in.

The exporter renders each new body in the formats scraped within the last `FORMAT_WANTED`
seconds, and only those (`exporter.py` says why); the classic one also when no one asked for
OpenMetrics, so a body is never rendered in no format. It keeps the plain (not gzip) bytes for
`PLAIN_WANTED` seconds after a plain scrape had to inflate a body. Only the times are stored;
the formats (`Formats`) are derived from them, so no impossible combination can be held.
"""

from __future__ import annotations

from enum import Enum

from otelgpu.exporters.prometheus.server import OPENMETRICS, TEXT

# Seconds after the last scrape of a format during which new bodies are rendered in it: longer
# than any sane scrape interval, short enough that a one-off `curl` does not make every body
# be rendered and held twice for long.
FORMAT_WANTED = 600.0
# Plain (not gzip) bodies are held for this long after a plain scrape had to inflate one; the
# rest of the time only the gzip bytes are (at 10k series the plain ones are 2.6 to 7 MB).
PLAIN_WANTED = 600.0
PLAIN = "plain"  # what `Demand.asked` is told when a plain scrape inflated a body


class Formats(Enum):
    """The formats a body is rendered in: one of them or both, never none."""

    CLASSIC = (True, False)
    OPENMETRICS = (False, True)
    BOTH = (True, True)

    @property
    def text(self) -> bool:
        """Whether the classic text is rendered."""
        return self.value[0]

    @property
    def openmetrics(self) -> bool:
        """Whether OpenMetrics is rendered."""
        return self.value[1]


class Demand:
    """When each format (`TEXT`, `OPENMETRICS`) and plain bytes (`PLAIN`) were last asked for.
    `asked` is called from the server's thread too: one dict store, atomic under the GIL."""

    __slots__ = ("_asked",)

    def __init__(self) -> None:
        self._asked: dict[str, float] = {}  # what → the clock reading it was last asked at

    def asked(self, what: str, now: float) -> None:
        """`what` was asked for at `now`."""
        self._asked[what] = now

    def formats(self, now: float) -> Formats:
        """The formats the body rendered at `now` is made in."""
        openmetrics = self._recent(OPENMETRICS, now, FORMAT_WANTED)
        if not openmetrics:
            return Formats.CLASSIC
        return Formats.BOTH if self._recent(TEXT, now, FORMAT_WANTED) else Formats.OPENMETRICS

    def plain(self, now: float) -> bool:
        """Whether the body rendered at `now` keeps its plain bytes."""
        return self._recent(PLAIN, now, PLAIN_WANTED)

    def _recent(self, what: str, now: float, window: float) -> bool:
        asked = self._asked.get(what)
        return asked is not None and now - asked < window
