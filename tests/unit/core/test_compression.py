"""gzip of bodies (otelgpu/confighttp/compression.py): ISA-L where installed, zlib otherwise, and any gzip
reader gets the bytes back."""

from __future__ import annotations

import gzip
import importlib
import platform
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otelgpu.confighttp import compression


@given(data=st.binary(max_size=5000), level=st.integers(0, 9))
def test_any_gzip_reader_gets_the_bytes_back(data: bytes, level: int) -> None:
    packed = compression.gzip_bytes(data, level)
    assert packed[:2] == b"\x1f\x8b"  # a gzip member, not a bare deflate stream
    assert gzip.decompress(packed) == data


@given(chunks=st.lists(st.binary(max_size=3000), max_size=8), level=st.integers(0, 9))
def test_chunks_compress_to_their_join(chunks: list[bytes], level: int) -> None:
    packed = compression.gzip_chunks(iter(chunks), level)
    assert packed[:2] == b"\x1f\x8b" and gzip.decompress(packed) == b"".join(chunks)


def test_a_body_of_many_small_chunks_packs_as_well_as_its_join() -> None:
    """A small node's `/metrics` is rendered as a chunk per family head and body, a few hundred
    bytes each; fed one by one, ISA-L packed each with little of what came before (a 27 kB
    body to 17 kB instead of 3.6 kB)."""
    lines = [b'hw_power_watts{gpu="%d",pod="train-%d"} 312.5\n' % (i % 2, i) for i in range(600)]
    chunks = [b"".join(lines[i : i + 2]) for i in range(0, len(lines), 2)]
    joined = len(compression.gzip_bytes(b"".join(chunks)))
    assert len(compression.gzip_chunks(iter(chunks))) <= joined * 1.1


def test_small_chunks_are_fed_together_and_a_large_one_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the compressor is handed: small chunks joined up to FEED bytes, a chunk of FEED
    bytes or more itself (no copy of a 60 kB chunk of a 10k-series body per family)."""
    fed: list[object] = []
    real = compression._compressobj

    class Recording:
        def __init__(self, *args: int) -> None:
            self._inner = real(*args)

        def compress(self, data: bytes) -> bytes:
            fed.append(data)
            return self._inner.compress(data)

        def flush(self) -> bytes:
            return self._inner.flush()

    monkeypatch.setattr(compression, "_compressobj", Recording)
    feed = compression.FEED
    small = [b"a" * 100] * 3
    large = b"b" * feed
    chunks = [*small, large, *small, b"c" * (feed - 400)]
    packed = compression.gzip_chunks(iter(chunks))
    assert gzip.decompress(packed) == b"".join(chunks)
    assert fed[0] == b"a" * 300 and fed[1] is large
    assert fed[2:] == [b"a" * 300 + b"c" * (feed - 400)]
    # At the edges: small chunks that make exactly FEED bytes go together, before and after a
    # large chunk, and a large chunk that is a view is handed over as that view, not a copy.
    fed.clear()
    view = memoryview(b"v" * feed)
    edges = [b"x" * (feed - 200), b"y" * 200, view, b"z" * (feed - 200), b"w" * 200]
    packed = compression.gzip_chunks(iter(edges))
    assert gzip.decompress(packed) == b"".join(edges)
    assert fed == [b"x" * (feed - 200) + b"y" * 200, view, b"z" * (feed - 200) + b"w" * 200]
    assert fed[1] is view
    # One byte over FEED is fed apart, from the start and after a flush; FEED - 1 is held.
    fed.clear()
    over = [b"x" * (feed - 200), b"y" * 201, b"z" * (feed - 200), b"p" * (feed - 1), b"w"]
    packed = compression.gzip_chunks(iter(over))
    assert gzip.decompress(packed) == b"".join(over)
    assert fed == [over[0], over[1], over[2], over[3] + over[4]]


def test_a_large_body_is_compressed() -> None:
    body = b"".join(
        b'gpu_power_watts{gpu="%d",pod="train-%d"} 312.5\n' % (i, i) for i in range(5000)
    )
    packed = compression.gzip_bytes(body)
    assert len(packed) < len(body) / 5 and gzip.decompress(packed) == body


def test_isal_is_used_where_it_is_a_dependency() -> None:
    """pyproject installs `isal` on x86-64 and arm64 only; zlib is used everywhere else."""
    expected = "isal" if platform.machine() in ("x86_64", "aarch64") else "zlib"
    used = compression.GZIP_IMPLEMENTATION
    assert used == expected


def test_without_isal_zlib_writes_the_same_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "isal", None)  # import isal → ImportError
    try:
        fallback = importlib.reload(compression)
        assert fallback.GZIP_IMPLEMENTATION == "zlib"
        assert gzip.decompress(fallback.gzip_bytes(b"abc" * 1000, 1)) == b"abc" * 1000
        chunked = fallback.gzip_chunks([b"abc" * 500, b"", b"abc" * 500], 1)
        assert gzip.decompress(chunked) == b"abc" * 1000
    finally:
        monkeypatch.undo()
        importlib.reload(compression)
    assert compression.GZIP_IMPLEMENTATION != "zlib" or platform.machine() not in (
        "x86_64",
        "aarch64",
    )


BODY = b"".join(b'gpu_power_watts{gpu="%d",pod="train-%d"} 312.5\n' % (i, i) for i in range(3000))


def test_the_default_level_is_1_for_bodies_and_chunks() -> None:
    """Level 1 is the agent's trade of CPU for bytes; the same level writes the same bytes."""
    one = compression.gzip_bytes(BODY, 1)
    assert one != compression.gzip_bytes(BODY, 0)  # so the check below can tell them apart
    assert compression.gzip_bytes(BODY) == one
    assert compression.gzip_chunks([BODY[:500], BODY[500:]]) == compression.gzip_chunks(
        [BODY[:500], BODY[500:]], 1
    )


def test_each_level_the_codec_has_is_its_own_and_higher_ones_are_its_highest() -> None:
    """ISA-L has levels 0 to 3 (a higher one is taken as 3); zlib has 0 to 9."""
    top = 3 if compression.GZIP_IMPLEMENTATION == "isal" else 9
    levels = [compression.gzip_bytes(BODY, level) for level in range(top + 1)]
    assert len(set(levels)) == top + 1
    assert compression.gzip_bytes(BODY, 9) == levels[top]


def test_gunzip_gives_back_what_gzip_wrote() -> None:
    assert compression.gunzip_bytes(compression.gzip_bytes(BODY)) == BODY
    assert compression.gunzip_bytes(gzip.compress(b"abc")) == b"abc"
