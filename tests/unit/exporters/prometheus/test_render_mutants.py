"""The encoded body's properties that mutation testing showed no test held
(docs/dev/mutation.md): the content type, real compression, no timestamp in the gzip body."""

from __future__ import annotations

import gzip

import pytest

from otelgpu.exporters.prometheus.render import CONTENT_TYPE, EMPTY, encode


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
