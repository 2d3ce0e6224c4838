"""OpenMetrics 1.0 text, made from the classic (0.0.4) body the exporter already rendered.

The exporter renders one classic exposition per update; a scraper that prefers OpenMetrics
(Prometheus 2.x/3.x by default) gets this conversion of it. Working from the rendered text
keeps one renderer (and its label hygiene) for both formats. What changes:

- counters: OpenMetrics names the family without `_total` (`# TYPE hw_energy_joules counter`)
  while the sample keeps it (`hw_energy_joules_total{...}`), so Prometheus stores the same
  series name as from classic text. A counter whose name does not end in `_total` (dcgm
  naming keeps dcgm-exporter's names, e.g. `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`) cannot be
  an OpenMetrics counter without renaming its samples, so it is typed `unknown`: the sample
  name dashboards query stays the same (`rate()` works on it as before; only the metadata
  type differs). The same happens to a `_total` counter whose family name would clash with
  another family (`foo` next to `foo_total`) or whose value is negative or NaN.
- `untyped` becomes `unknown`; gauges stay gauges.
- HELP: OpenMetrics also escapes `"` (classic text escapes only `\\` and newline).
- timestamps (none today) go from milliseconds to seconds.
- no `# UNIT` (optional in OpenMetrics; a wrong one fails the whole scrape in Prometheus 3).
- `# EOF` ends the body.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from otelgpu.exporters.prometheus.render import (
    Body,
    Rendered,
    body_of,
    body_of_chunks,
    gzip_body,
)

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
EOF = b"# EOF\n"
_TOTAL = "_total"
_QUOTE = '\\"'  # classic HELP leaves `"` as is; OpenMetrics escapes it like label values


@dataclass(slots=True)
class _Family:
    name: str
    type: str = "untyped"
    help: str | None = None
    samples: list[str] = field(default_factory=list)  # blocks of whole lines, each `...\n`


def to_openmetrics(classic: bytes | str) -> str:
    """The OpenMetrics 1.0 text of a classic exposition (as `render_text` writes it)."""
    text = classic.decode("utf-8") if isinstance(classic, bytes) else classic
    families = _blocks(text)
    if families is None:  # not the renderer's regular shape: line by line
        families = _lines(text)
    names = {f.name for f in families}
    out: list[str] = []
    for family in families:
        countable = family.type != "counter" or not any(
            _NOT_COUNTABLE.search(block) for block in family.samples
        )
        out.append(_head(family.name, family.type, family.help, names, countable))
        out.extend(family.samples)
    out.append("# EOF\n")
    return "".join(out)


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
    sample chunks (the same objects) under its OpenMetrics head, then `# EOF`. What
    `to_openmetrics` of the joined classic text gives, without decoding, scanning and
    re-encoding 6 MB of text each cycle (~30 ms of the GIL at 10k series, some of it in single
    calls a scrape cannot interrupt). Without `plain`, only its gzip bytes (`body_of_chunks`).
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


# A sample line with a timestamp (a match inside a label value is a false alarm, which only
# costs the slow path), and a counter sample whose value OpenMetrics refuses. Both start with
# a literal, so `re` scans for it in C: 10k series take a few milliseconds.
_STAMPED = re.compile(r"\} \S+ \S+\n")
_STAMPED_BARE = re.compile(r"\n[^{ \n]+ \S+ \S+\n")
_NOT_COUNTABLE = re.compile(r" (?:-[^ \n]*|NaN)\n")
_NOT_COUNTABLE_BYTES = re.compile(_NOT_COUNTABLE.pattern.encode())


def _blocks(text: str) -> list[_Family] | None:
    """Families whose samples are taken as whole blocks between metadata lines (the fast path
    for what `render_text` writes), or None when a block is not samples of its family alone,
    without timestamps or blank lines."""
    if text and not text.endswith("\n"):
        return None
    families: list[_Family] = []
    current: _Family | None = None
    pos, size = 0, len(text)
    while pos < size:
        if text.startswith("#", pos):
            line_end = text.index("\n", pos)
            current = _metadata_line(text[pos:line_end], current, families)
            pos = line_end + 1
            continue
        end = text.find("\n#", pos) + 1 or size  # the samples up to the next `#` line
        block = text[pos:end]
        if current is None or not _regular(block, current):
            return None
        current.samples.append(block)
        pos = end
    return families


def _metadata_line(line: str, current: _Family | None, families: list[_Family]) -> _Family | None:
    """Applies one `#` line; returns the family the next samples belong to."""
    parts = line.split(" ", 3)
    if len(parts) < 3 or parts[0] != "#" or parts[1] not in ("HELP", "TYPE"):
        return current  # other comments are not allowed in OpenMetrics
    if current is None or current.name != parts[2] or current.samples:
        current = _Family(parts[2])
        families.append(current)
    if parts[1] == "TYPE":
        current.type = parts[3] if len(parts) > 3 else "untyped"
    else:
        current.help = parts[3] if len(parts) > 3 else ""
    return current


def _regular(block: str, family: _Family) -> bool:
    if family.type not in ("gauge", "counter", "untyped") or "\n\n" in block:
        return False
    lines = "\n" + block
    if _STAMPED.search(block) or _STAMPED_BARE.search(lines):
        return False
    own = lines.count(f"\n{family.name}{{") + lines.count(f"\n{family.name} ")
    return own == block.count("\n")


def _lines(text: str) -> list[_Family]:
    """The classic text split in families line by line (any valid classic text)."""
    families: list[_Family] = []
    current: _Family | None = None
    for line in text.split("\n"):
        if not line:
            continue
        if line.startswith("#"):
            current = _metadata_line(line, current, families)
            continue
        name = _sample_name(line)
        if current is None or not _belongs(name, current):
            current = _Family(name)
            families.append(current)
        current.samples.append(_sample(line))
    return families


def _sample_name(line: str) -> str:
    end = len(line)
    for stop in ("{", " "):
        at = line.find(stop)
        if at != -1:
            end = min(end, at)
    return line[:end]


def _belongs(name: str, family: _Family) -> bool:
    if name == family.name:
        return True
    suffixes = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
    return any(name == family.name + s for s in suffixes.get(family.type, ()))


def _head(name: str, type_: str, help_: str | None, names: set[str], countable: bool) -> str:
    """A family's OpenMetrics metadata lines, from its classic name, type and HELP text (as
    the classic format escapes it). `countable`: no sample value OpenMetrics refuses in a
    counter (negative, NaN)."""
    name, type_ = _metadata(name, type_, names, countable)
    head = f"# TYPE {name} {type_}\n"
    if help_:
        escaped = help_.replace('"', _QUOTE)
        head += f"# HELP {name} {escaped}\n"
    return head


def _metadata(name: str, type_: str, names: set[str], countable: bool) -> tuple[str, str]:
    """The OpenMetrics family name and type of a classic family."""
    if type_ == "counter":
        base = name[: -len(_TOTAL)]
        if (
            name.endswith(_TOTAL)
            and base
            and base not in names
            and base + "_created" not in names
            and countable
        ):
            return base, "counter"
        return name, "unknown"
    if type_ in ("gauge", "histogram", "summary"):
        return name, type_
    return name, "unknown"


def _split(line: str) -> tuple[str, list[str]]:
    """A sample line (without its newline) as `name{labels}` and the value [timestamp]."""
    space = line.find(" ")
    brace = line.find("{")
    if brace != -1 and (space == -1 or brace < space):
        end = line.rindex("}") + 1  # values and timestamps hold no `}`
        return line[:end], line[end:].split()
    return line[:space], line[space:].split()


def _sample(line: str) -> str:
    """The sample line (without its newline) in OpenMetrics: the same, but a timestamp in
    seconds."""
    head, tail = _split(line)
    if len(tail) < 2:
        return line + "\n"
    try:
        seconds = int(tail[1]) / 1000
    except ValueError:
        return f"{head} {tail[0]}\n"  # a timestamp OpenMetrics cannot carry is left out
    return f"{head} {tail[0]} {seconds!r}\n"


def encode(classic: Body) -> Body:
    """The OpenMetrics body (plain and gzip) of a classic one; CPU work for a worker thread."""
    plain = to_openmetrics(classic.text()).encode("utf-8")  # not a plain scrape: not kept
    return body_of(plain, classic.series)


class Exposition:
    """One body version in the formats scrapers want: the classic body, its OpenMetrics
    rendering, or both. The exporter renders only the formats asked for recently; a scrape
    that wants the other one converts it once (from the held body, by the render's `Layout`,
    or by `to_openmetrics` for a bare classic body) and the scrapes after it reuse it.
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
                layout = self._layout
                if layout is None:
                    self._openmetrics = encode(classic)
                else:
                    self._openmetrics = gzip_body(
                        layout.openmetrics(classic.text()), classic.series
                    )
            return self._openmetrics

    def _held(self) -> tuple[Body | None, Body | None]:
        return self._classic, self._openmetrics
