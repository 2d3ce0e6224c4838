"""OpenMetrics 1.0 text, made of the classic (0.0.4) render's own sample lines.

The exporter renders its series once, as the classic text's chunks (`render.render_chunks`);
the OpenMetrics body is the same sample chunks under OpenMetrics heads, so both formats carry
the same labels, values and order, and one renderer (with its label hygiene) serves both. The
render keeps each family's two heads and the length of its samples (`Layout`), so a body held
in one format is turned into the other by swapping heads, without parsing. What differs:

- counters: OpenMetrics names the family without `_total` (`# TYPE hw_energy_joules counter`)
  while the sample keeps it (`hw_energy_joules_total{...}`), so Prometheus stores the same
  series name as from classic text. A counter whose name does not end in `_total` (dcgm
  naming keeps dcgm-exporter's names, e.g. `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`) cannot be
  an OpenMetrics counter without renaming its samples, so it is typed `unknown`: the sample
  name dashboards query stays the same (`rate()` works on it as before; only the metadata
  type differs). The same happens to a `_total` counter whose family name would clash with
  another family (`foo` next to `foo_total`) or whose value is negative or NaN.
- gauges stay gauges (a family is a gauge or a counter, `series.FamilyType`: the pdata model
  has no histogram or summary).
- HELP: OpenMetrics also escapes `"` (classic text escapes only `\\` and newline).
- no `# UNIT` (optional in OpenMetrics; a wrong one fails the whole scrape in Prometheus 3).
- `# EOF` ends the body.

A classic `Body` made by hand, without a render (tests, tools), has no layout: its text goes
out as one block of samples followed by `# EOF`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from otelgpu.exporters.prometheus.render import Body, Rendered, body_of_chunks, gzip_body
from otelgpu.exporters.prometheus.series import FamilyType

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
EOF = b"# EOF\n"
_TOTAL = "_total"
_QUOTE = '\\"'  # classic HELP leaves `"` as is; OpenMetrics escapes it like label values


class Part(NamedTuple):
    """One family in both texts: its heads and the length of its samples."""

    classic: bytes  # `# HELP`, `# TYPE` as the classic format writes them
    openmetrics: bytes  # the same in OpenMetrics
    samples: int  # bytes of sample lines, the same in both


@dataclass(frozen=True, slots=True)
class Layout:
    """How the two formats' texts of one render are made of the same sample lines: each
    family's heads in both formats and the length of its samples. Either text is the other
    with the heads swapped and `# EOF` added or dropped, so the body of a format no one asked
    for is made from the one held by slicing, without parsing (a few kB per 100 families)."""

    parts: tuple[Part, ...] = ()

    @staticmethod
    def opaque(classic_text: bytes) -> Layout:
        """The layout of a classic text made without a render: one block of samples."""
        return Layout((Part(b"", b"", len(classic_text)),))

    def classic(self, openmetrics_text: bytes) -> Iterator[bytes | memoryview]:
        """The classic text in pieces, from the OpenMetrics text of the same render."""
        view = memoryview(openmetrics_text)  # slices without copies
        pos = 0
        for part in self.parts:
            pos += len(part.openmetrics)
            yield part.classic
            yield view[pos : pos + part.samples]
            pos += part.samples

    def openmetrics(self, classic_text: bytes) -> Iterator[bytes | memoryview]:
        """The OpenMetrics text in pieces, from the classic text of the same render."""
        view = memoryview(classic_text)
        pos = 0
        for part in self.parts:
            pos += len(part.classic)
            yield part.openmetrics
            yield view[pos : pos + part.samples]
            pos += part.samples
        yield EOF


def layout_of(rendered: Rendered) -> Layout:
    """The `Layout` of a render, while its chunks are still held."""
    names = {span.name for span in rendered.spans}
    chunks = rendered.chunks
    parts = []
    for span in rendered.spans:
        samples = chunks[span.head + 1 : span.end]
        countable = span.type != "counter" or not any(
            _NOT_COUNTABLE_BYTES.search(chunk) for chunk in samples
        )
        head = _head(span.name, span.type, span.help, names, countable).encode()
        parts.append(Part(chunks[span.head], head, sum(map(len, samples))))
    return Layout(tuple(parts))


def render_openmetrics(
    rendered: Rendered, plain: bool = True, layout: Layout | None = None, *, drain: bool = False
) -> Body:
    """The OpenMetrics body of a render, made while its chunks are still held: each family's
    sample chunks (the same objects) under its OpenMetrics head, then `# EOF`; the text is
    never decoded, scanned or encoded again (at 10k series that was ~30 ms of the GIL each
    cycle). Without `plain`, only its gzip bytes (`body_of_chunks`).
    `drain`: the render's chunks are not needed after this (no classic body is made of them),
    so each is let go of as soon as it is compressed. Runs in the render thread."""
    layout = layout or layout_of(rendered)
    chunks = rendered.chunks
    out: list[bytes] = []
    for span, part in zip(rendered.spans, layout.parts, strict=True):
        out.append(part.openmetrics)
        out += chunks[span.head + 1 : span.end]
    out.append(EOF)
    if drain:
        chunks.clear()
    return body_of_chunks(out, rendered.series, plain)


# A counter sample whose value OpenMetrics refuses (negative, NaN). It starts with a literal,
# so `re` scans for it in C: 10k series take a few milliseconds.
_NOT_COUNTABLE_BYTES = re.compile(rb" (?:-[^ \n]*|NaN)\n")


def _head(name: str, type_: FamilyType, help_: str | None, names: set[str], countable: bool) -> str:
    """A family's OpenMetrics metadata lines, from its classic name, type and HELP text (as
    the classic format escapes it). `countable`: no sample value OpenMetrics refuses in a
    counter (negative, NaN)."""
    name, exposed = _metadata(name, type_, names, countable)
    head = f"# TYPE {name} {exposed}\n"
    if help_:
        escaped = help_.replace('"', _QUOTE)
        head += f"# HELP {name} {escaped}\n"
    return head


def _metadata(name: str, type_: FamilyType, names: set[str], countable: bool) -> tuple[str, str]:
    """The OpenMetrics family name and type of a classic family."""
    if type_ == "gauge":
        return name, "gauge"
    base = name[: -len(_TOTAL)]
    clash = base in names or base + "_created" in names  # `foo` beside `foo_total`
    if name.endswith(_TOTAL) and base and not clash and countable:
        return base, "counter"
    return name, "unknown"


class Exposition:
    """One body version in the formats scrapers want: the classic body, its OpenMetrics
    rendering, or both. The exporter renders only the formats asked for recently; a scrape
    that wants the other one converts it once (from the held body, by the render's `Layout`;
    a classic body made without a render as one opaque block) and the scrapes after it reuse
    it.
    Conversions make the gzip bytes only (a plain scrape then inflates them, see `Body`)."""

    __slots__ = ("_classic", "_layout", "_lock", "_openmetrics")

    def __init__(
        self,
        classic: Body | None,
        openmetrics: Body | None = None,
        layout: Layout | None = None,
    ) -> None:
        if classic is None and (openmetrics is None or layout is None):
            raise ValueError("an exposition without its classic body needs the OpenMetrics one")
        self._classic = classic
        self._openmetrics = openmetrics
        self._layout = layout
        self._lock = threading.Lock()

    def inflated(self) -> bool:
        """Whether a plain request had to inflate one of its bodies (see `Body`)."""
        return any(body is not None and body.inflated for body in self._held())

    @property
    def converted(self) -> bool:
        """Whether the OpenMetrics body exists already."""
        return self._openmetrics is not None

    @property
    def holds_classic(self) -> bool:
        """Whether the classic body exists already."""
        return self._classic is not None

    @property
    def classic(self) -> Body:
        """The classic body, converted now when it was not rendered (thread-safe)."""
        body = self._classic
        if body is not None:
            return body
        with self._lock:
            if self._classic is None:
                source, layout = self._openmetrics, self._layout
                assert source is not None and layout is not None  # the constructor checked
                self._classic = gzip_body(layout.classic(source.text()), source.series)
            return self._classic

    def openmetrics(self) -> Body:
        """The OpenMetrics body, converted now when no one asked before (thread-safe)."""
        body = self._openmetrics
        if body is not None:
            return body
        with self._lock:
            if self._openmetrics is None:
                classic = self._classic
                assert classic is not None  # the constructor checked
                text = classic.text()
                layout = self._layout or Layout.opaque(text)
                self._openmetrics = gzip_body(layout.openmetrics(text), classic.series)
            return self._openmetrics

    def _held(self) -> tuple[Body | None, Body | None]:
        return self._classic, self._openmetrics
