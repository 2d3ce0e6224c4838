"""The body: HELP and TYPE lines, their escaping, family order, series count, encodings (the
content type, real compression, no timestamp in the gzip body)."""

from __future__ import annotations

import gzip

import pytest
from prometheus_client.parser import text_string_to_metric_families

from otelgpu.exporters.prometheus.openmetrics import render_openmetrics
from otelgpu.exporters.prometheus.render import (
    CONTENT_TYPE,
    EMPTY,
    encode,
    escape_help,
    render,
    render_text,
)
from otelgpu.exporters.prometheus.series import Family


def _family(name: str, help_: str, *lines: str, type_: str = "gauge") -> Family:
    family = Family(name, type_, help_)
    for i, line in enumerate(lines):
        family.write(0, line, f"{i}\n", 0)
    return family


def test_help_then_type_then_series_per_family() -> None:
    text, count = render_text(
        [
            _family("a", "First.", 'a{x="1"} ', 'a{x="2"} '),
            _family("b_total", "Second.", "b_total ", type_="counter"),
        ]
    )
    assert text == (
        "# HELP a First.\n"
        "# TYPE a gauge\n"
        'a{x="1"} 0\n'
        'a{x="2"} 1\n'
        "# HELP b_total Second.\n"
        "# TYPE b_total counter\n"
        "b_total 0\n"
    )
    assert count == 3


def test_no_help_line_without_help_text() -> None:
    text, _ = render_text([_family("a", "", "a ")])
    assert text == "# TYPE a gauge\na 0\n"


def test_families_without_series_are_left_out() -> None:
    text, count = render_text([_family("empty", "Nothing."), _family("a", "A.", "a ")])
    assert "empty" not in text
    assert count == 1


def test_help_escapes_backslash_and_newline_only_as_the_format_says() -> None:
    assert escape_help("a\\b") == "a\\\\b"
    assert escape_help("a\nb") == "a\\nb"
    assert escape_help("\\n") == "\\\\n"  # a literal backslash-n stays two characters
    assert escape_help('say "hi"') == 'say "hi"'  # quotes are not escaped in HELP
    assert escape_help("a\rb\x00c\u2028d") == "a\ufffdb\ufffdc\ufffdd"


def test_help_round_trips_through_a_parser() -> None:
    help_ = 'GPU "busy" time\\ratio\nper cycle'
    text, _ = render_text([_family("a", help_, "a ")])
    (family,) = text_string_to_metric_families(text)
    assert family.documentation == help_
    assert text.count("\n") == 3  # HELP, TYPE, one series: the newline stayed escaped


def test_encodings_hold_the_same_text() -> None:
    body = encode("a 1\n", 1)
    assert body.plain == b"a 1\n"
    assert gzip.decompress(body.gzipped) == body.plain
    assert body.series == 1
    assert encode("a 1\n", 1).gzipped == body.gzipped  # mtime 0: the same bytes every time
    assert (EMPTY.plain, gzip.decompress(EMPTY.gzipped), EMPTY.series) == (b"", b"", 0)


def test_the_content_type_names_the_text_format_version() -> None:
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"


def test_the_gzip_body_is_compressed() -> None:
    text = "".join(f'gpu_utilization{{gpu="{i}",pod="train-{i % 7}"}} 0.5\n' for i in range(2000))
    body = encode(text, 2000)
    assert gzip.decompress(body.gzipped) == body.plain == text.encode()
    assert len(body.gzipped) < len(body.plain) // 5  # stored, not deflated, would be larger
    assert body.series == 2000


@pytest.mark.parametrize("gzipped", [EMPTY.gzipped, encode("a 1\n", 1).gzipped])
def test_the_gzip_body_carries_no_timestamp(gzipped: bytes) -> None:
    # Same text, same bytes: a body built at another second must not differ (RFC 1952: MTIME
    # is bytes 4-7 of the header; 0 means none).
    assert gzipped[4:8] == b"\0\0\0\0"


def test_the_empty_body() -> None:
    assert (EMPTY.plain, gzip.decompress(EMPTY.gzipped), EMPTY.series) == (b"", b"", 0)


def test_render_builds_both_encodings_of_the_text_once() -> None:
    families = [_family("a", "First.", 'a{x="1"} ', 'a{x="2"} '), _family("e", "Empty.")]
    body = render(families)
    text, _ = render_text(families)
    assert (body.plain, gzip.decompress(body.gzipped), body.series) == (
        text.encode(),
        text.encode(),
        2,
    )
    assert body.plain.endswith(b'a{x="2"} 1\n') and b"# TYPE e" not in body.plain


def test_chunks_are_the_text_cut_small() -> None:
    """`render_chunks` joined is `render_text` encoded; no chunk holds more than CHUNK_SERIES
    series (each is built on the pipeline loop while scrapes wait for the GIL)."""
    from otelgpu.exporters.prometheus.render import CHUNK_SERIES, join_chunks, render_chunks

    families = [
        _family(
            "a_total",
            "help\\n",
            *(f'a_total{{i="{i}"}} ' for i in range(3 * CHUNK_SERIES + 5)),
            type_="counter",
        ),
        _family("b", "", "b ", 'b{x="1"} '),
    ]
    rendered = render_chunks(families)
    chunks, count = rendered.chunks, rendered.series
    text, expected = render_text(families)
    assert count == expected == 3 * CHUNK_SERIES + 7
    assert max(chunk.count(b"\n") for chunk in chunks) <= CHUNK_SERIES + 2
    assert len(chunks) >= 5
    assert join_chunks(chunks) == text.encode() and chunks == []


def _large_render() -> tuple[list[Family], int]:
    """~4 MB of exposition in many chunks, the size class of a 10k-series node."""
    series = 72 * 1024
    family = _family(
        "gpu_power_watts",
        "Power.",
        *(f'gpu_power_watts{{gpu="{i % 8}",pod="train-{i}",ns="ml"}} ' for i in range(series)),
    )
    return [family], series


@pytest.mark.parametrize(
    ("text", "openmetrics"), [(True, False), (True, True), (False, True)], ids=str
)
def test_a_gzip_only_body_is_never_held_plain(text: bool, openmetrics: bool) -> None:
    """When no one scrapes plain text, the bodies are compressed chunk by chunk: the plain
    bytes are never built whole (at 10k series 3 to 7 MB, a transient copy per update), and
    each chunk is let go of once compressed. tracemalloc's peak while they are made stays well
    under the size of the plain body, whatever the formats rendered."""
    import tracemalloc

    from otelgpu.exporters.prometheus.exporter import _encode
    from otelgpu.exporters.prometheus.render import render_chunks

    families, series = _large_render()
    classic = render_text(families)[0].encode()
    rendered = render_chunks(families)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        exposition = _encode(rendered, text, openmetrics, False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rendered.chunks == []
    assert (exposition.holds_classic, exposition.converted) == (text, openmetrics)
    # What is allocated is the compressor's state (~0.5 MB with ISA-L) and the gzip bytes
    # (~11 % of the text here); a plain body would be the whole text again.
    assert peak < len(classic) / 2, (peak, len(classic))
    om = render_openmetrics(render_chunks(families)).plain
    for body, plain in ((exposition.classic, classic), (exposition.openmetrics(), om)):
        # rendered, or converted from the other by a scrape: gzip only either way
        assert not body.holds_plain and body.series == series
        assert gzip.decompress(body.gzipped) == plain and body.plain == plain


def test_the_chunks_make_the_same_body_with_or_without_plain_bytes() -> None:
    from otelgpu.exporters.prometheus.render import body_of_chunks, render_chunks

    families, series = _large_render()
    with_plain = body_of_chunks(render_chunks(families).chunks, series, True)
    gzip_only = body_of_chunks(render_chunks(families).chunks, series, False)
    assert with_plain.holds_plain and not gzip_only.holds_plain
    assert gzip.decompress(gzip_only.gzipped) == with_plain.plain == gzip_only.plain
    assert len(gzip_only.gzipped) < len(with_plain.plain) / 5


def test_a_gzip_only_body_says_it_was_inflated_only_when_a_plain_request_inflated_it() -> None:
    """`inflated` tells the exporter that a scraper asked for plain text: reading the plain
    bytes of a body that holds them, or converting a body for the agent's own use (`text`),
    is no such request."""
    from otelgpu.exporters.prometheus.render import Body

    gzipped = encode("a 1\n", 1).gzipped
    held = Body(b"a 1\n", gzipped, 1)
    assert held.plain == b"a 1\n" and not held.inflated
    gzip_only = Body(None, gzipped, 1)
    assert gzip_only.text() == b"a 1\n" and not gzip_only.inflated
    assert not gzip_only.holds_plain
    assert gzip_only.plain == b"a 1\n" and gzip_only.inflated and gzip_only.holds_plain


def test_bodies_are_compressed_at_level_1() -> None:
    """Level 1: the agent's trade of CPU for bytes (module doc)."""
    from otelgpu.confighttp.compression import gzip_bytes

    text = "".join(f'gpu_power_watts{{gpu="{i}"}} {i * 3.5}\n' for i in range(2000))
    body = encode(text, 2000)
    assert body.gzipped == gzip_bytes(text.encode(), 1) != gzip_bytes(text.encode(), 2)
