"""gzip for bodies the agent builds once and sends many times (`/metrics`, OpenMetrics).

The `/metrics` body at 10k series is ~2.6 MB, and it is compressed again after every update.
Python's zlib at level 1 takes ~5 ms for it, as long as ingesting and rendering the update
together; ISA-L's deflate (the `isal` package, Intel's Intelligent Storage Acceleration
Library: wheels for x86-64 and arm64) writes the same gzip format in ~1.3 ms, for a body ~14 %
larger (~182 kB instead of ~160 kB). Any gzip reader decompresses either.

The agent uses ISA-L where the package is installed (a dependency on x86-64 and arm64, where
it ships wheels) and zlib otherwise; `GZIP_IMPLEMENTATION` says which:
`python -c "from otelgpu.confighttp.compression import GZIP_IMPLEMENTATION as g; print(g)"`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from typing import Any

_GZIP_WBITS = 31  # deflate in a gzip wrapper (header with mtime 0, CRC-32 and size trailer)
FEED = 64 * 1024  # bytes handed to the compressor at a time (`gzip_chunks`)


def _codecs() -> tuple[str, Callable[..., Any], Callable[..., bytes]]:
    try:
        from isal import isal_zlib  # only the codec, not `isal.igzip` (its import costs ~2 MiB)
    except ImportError:
        return "zlib", zlib.compressobj, zlib.decompress
    return "isal", isal_zlib.compressobj, isal_zlib.decompress


GZIP_IMPLEMENTATION, _compressobj, _decompress = _codecs()


def gzip_bytes(data: bytes, level: int = 1) -> bytes:
    """`data` as one gzip member (level 0 to 3 with ISA-L, 0 to 9 with zlib; higher is clamped)."""
    return gzip_chunks((data,), level)


def gzip_chunks(chunks: Iterable[bytes], level: int = 1) -> bytes:
    """The bytes of `chunks`, one after the other, as one gzip member: what `gzip_bytes` of
    their join gives once inflated, without the join (a body of many chunks is never held
    whole; each deflate lets go of the GIL). Small chunks are gathered, up to `FEED` bytes,
    into one input: ISA-L packs each input with little of what came before, so a body fed a
    few hundred bytes at a time came out several times larger than its join. A chunk of
    `FEED` bytes or more is handed over as it is, never copied."""
    level = min(level, 3) if GZIP_IMPLEMENTATION == "isal" else level
    compressor = _compressobj(level, zlib.DEFLATED, _GZIP_WBITS)
    out: list[bytes] = []
    held: list[bytes] = []
    size = 0
    for chunk in chunks:
        if held and size + len(chunk) > FEED:
            out.append(compressor.compress(b"".join(held)))
            held.clear()
            size = 0
        if len(chunk) >= FEED:
            out.append(compressor.compress(chunk))
        else:
            held.append(chunk)
            size += len(chunk)
    if held:
        out.append(compressor.compress(b"".join(held)))
    out.append(compressor.flush())
    return b"".join(out)


def gunzip_bytes(data: bytes) -> bytes:
    """The bytes of one gzip member (as `gzip_bytes` writes; ~0.7 ms for 2.6 MB with ISA-L)."""
    return bytes(_decompress(data, _GZIP_WBITS))
