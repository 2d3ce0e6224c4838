"""The `/metrics` body: text exposition format 0.0.4, plain and gzip, built once per update.

Per family: `# HELP name text` (only when the family has a help text; `\\` and newline
escaped as the format says, other control characters replaced like label values are, see
`labels.replace_unsafe`), `# TYPE name gauge|counter`, then one line per series. Families
without series are left out entirely. The text is made once, as chunks (`render_chunks`); the
OpenMetrics body is made of the same chunks under other heads (`openmetrics.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import NamedTuple, cast

from otelgpu.confighttp.compression import gunzip_bytes, gzip_bytes, gzip_chunks
from otelgpu.exporters.prometheus.labels import replace_unsafe
from otelgpu.exporters.prometheus.series import Family, FamilyType

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Level 1 compresses 10k series (2.6 MB) to ~160 to 180 kB in ~1.3 ms (ISA-L) or ~5 ms (zlib, see
# `otelgpu.confighttp.compression`); zlib's level 6 saves another ~20 % for three times the
# CPU, a bad trade for a node agent.
_GZIP_LEVEL = 1
CHUNK_SERIES = 256  # series per chunk of `render_chunks` (~0.1 ms of GIL to join and encode)


class Body:
    """One rendered body; replaced whole, never mutated (but for the cache below).

    The gzip bytes are always held (every Prometheus scrape asks for them). The plain bytes
    are held only when given: the exporter drops them while no scraper has asked for plain text
    recently (at 10k series they are 2.6 to 7 MB), and then the first plain request inflates
    them from the gzip (~1-2 ms), keeps them for the scrapes of this body, and says so
    (`inflated`), so that the exporter holds plain bodies again for a while."""

    __slots__ = ("_lock", "_plain", "gzipped", "inflated", "series")

    def __init__(self, plain: bytes | None, gzipped: bytes, series: int) -> None:
        self._plain = plain
        self.gzipped = gzipped
        self.series = series
        self.inflated = False  # a plain request found no plain bytes and inflated them
        self._lock = threading.Lock()

    @property
    def plain(self) -> bytes:
        """The plain bytes (inflated from the gzip on first use when not held; thread-safe)."""
        plain = self._plain
        if plain is None:
            with self._lock:
                if self._plain is None:
                    self._plain = gunzip_bytes(self.gzipped)
                    self.inflated = True
                plain = self._plain
        return plain

    def text(self) -> bytes:
        """The plain bytes for this process's own use (a conversion): inflated when not held,
        but neither kept nor counted as a plain scrape (`inflated`)."""
        plain = self._plain
        return plain if plain is not None else gunzip_bytes(self.gzipped)

    @property
    def holds_plain(self) -> bool:
        """Whether the plain bytes are held (given, or inflated since)."""
        return self._plain is not None


EMPTY = Body(b"", gzip_bytes(b""), 0)


def render_text(families: Iterable[Family]) -> tuple[str, int]:
    """The exposition text of `families` (`render_chunks` joined), and how many series it
    holds."""
    rendered = render_chunks(families)
    return b"".join(rendered.chunks).decode(), rendered.series


class Span(NamedTuple):
    """Where one family is in `Rendered.chunks`: its head (`# HELP`, `# TYPE`) at `head`, its
    samples up to `end`; with what another format's head needs (the help text escaped as
    the classic format escapes it, "" for none)."""

    name: str
    type: FamilyType
    help: str
    head: int
    end: int


@dataclass(slots=True)
class Rendered:
    """The classic exposition as UTF-8 chunks, where each family is in them, and how many
    series they hold. The OpenMetrics body is made of the same sample chunks under other heads
    (`openmetrics.render_openmetrics`), without parsing the text again."""

    chunks: list[bytes] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    series: int = 0


def render_chunks(families: Iterable[Family]) -> Rendered:
    """The exposition of `families` as UTF-8 chunks of at most `CHUNK_SERIES` series each
    (`render_text`'s bytes, cut between lines), where each family is, and how many series.

    Built on the pipeline's event loop, so it is cut small on purpose: one 6 MB `str.join` or
    `encode` holds the GIL for milliseconds, and a scrape on the server's thread waits that
    long; per chunk the holds are ~0.1 ms. `body_of_chunks` makes the body of them."""
    out = Rendered()
    chunks = out.chunks
    for family in families:
        count = len(family)
        if not count:
            continue
        help_ = escape_help(family.help) if family.help else ""
        head = len(chunks)
        lead = f"# HELP {family.name} {help_}\n" if help_ else ""
        chunks.append(f"{lead}# TYPE {family.name} {family.type}\n".encode())
        items = iter(family.lines())  # prefix, value, prefix, value, ...
        while part := "".join(chain.from_iterable(islice(items, CHUNK_SERIES))):
            chunks.append(part.encode())
        out.spans.append(Span(family.name, family.type, help_, head, len(chunks)))
        out.series += count
    return out


def body_of_chunks(chunks: list[bytes], series: int, plain: bool) -> Body:
    """The body of `render_chunks`' chunks (emptied), with its plain bytes when `plain`.
    Without them the chunks are gzipped one after the other and let go of as they are, so
    the plain body (3 to 7 MB at 10k series) is never built only to be compressed; `Body.plain`
    inflates it if a plain scrape comes after all."""
    if plain:
        return body_of(join_chunks(chunks), series)
    return gzip_body(_drained(chunks), series)


def gzip_body(chunks: Iterable[bytes | memoryview], series: int) -> Body:
    """The gzip-only body of `chunks`, compressed one after the other as they come: the plain
    text is never held whole."""
    # zlib and ISA-L read any buffer: a memoryview slice is compressed without a copy.
    return Body(None, gzip_chunks(cast(Iterable[bytes], chunks), _GZIP_LEVEL), series)


def _drained(chunks: list[bytes]) -> Iterator[bytes]:
    """`chunks` in order, each taken out of the list as it is handed over."""
    chunks.reverse()
    while chunks:
        yield chunks.pop()


def join_chunks(chunks: list[bytes]) -> bytes:
    """The body of `render_chunks`' chunks (emptied). `bytes.join` lets go of the GIL while it
    copies a megabyte or more, so the scrape thread runs meanwhile."""
    body = b"".join(chunks)
    chunks.clear()
    return body


def render(families: Iterable[Family]) -> Body:
    """The body of `families` in both encodings, built once (`render_text`, then `encode`)."""
    return encode(*render_text(families))


def body_of(plain: bytes, series: int) -> Body:
    """The body of `plain` bytes: gzipped here (CPU-heavy; zlib and ISA-L let go of the GIL)."""
    return Body(plain, gzip_bytes(plain, _GZIP_LEVEL), series)


def encode(text: str, series: int) -> Body:
    """Both encodings of a rendered text; CPU-heavy, run it in a worker thread (zlib releases
    the GIL, so the event loop keeps serving the previous body meanwhile)."""
    return body_of(text.encode("utf-8"), series)


def escape_help(text: str) -> str:
    """HELP text as the format wants it: `\\` → `\\\\`, newline → `\\n`, and what the format
    cannot carry replaced (a description is data: an OTLP sender or a peer may have set it)."""
    return replace_unsafe(text).replace("\\", "\\\\").replace("\n", "\\n")
