"""Value decoding: what a value says once its encodings are undone, layer after layer.

A credential is as much a credential base64-encoded, escaped or gzipped, so the credential
shapes (value_shapes.py) are looked for in every reading of a value: the value itself, then
what it decodes to, layer after layer (`readings`: at most `MAX_LAYERS` encoding steps):
percent, HTML (`&quot;`) and `\\uXXXX` / `\\xXX` escapes, full-width forms, every base64 or
base64url run of 16 characters or more, every hex run of 16 digits or more, base64 wrapped
over lines, and gzip or zlib inside any of them (base64 of gzip of a pair, hex of a URL with
a password). Decoded bytes are read as text when mostly printable, and handed on as bytes for
the key-material check either way.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
import zlib
from collections.abc import Iterator
from urllib.parse import unquote

_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\x([0-9A-Fa-f]{2})")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{16,}={0,2}")
_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){8,}(?![0-9A-Fa-f])")
_WRAPPED_BASE64 = re.compile(r"[A-Za-z0-9+/_\-]+(?:\s+[A-Za-z0-9+/_\-]+)+\s*={0,2}\s*")
MIN_PRINTABLE = 0.9  # of decoded bytes, for them to be text worth checking
# Decoding is bounded: at most this many layers deep (base64 of a pair is 1, base64 of
# base64 of it 2; decompressing gzip or zlib is part of the layer that exposed it), this
# many readings of one value in all, and this many bytes out of one decompression.
MAX_LAYERS = 4
MAX_READINGS = 64
MAX_INFLATED = 4096


def readings(value: str) -> Iterator[str | bytes]:
    """`value`, then what it decodes to, layer after layer (at most `MAX_LAYERS` deep and
    `MAX_READINGS` in all): percent, HTML and `\\uXXXX` / `\\xXX` escapes, NFKC forms
    (a full-width colon), and each base64 or hex run (or base64 wrapped over lines) as bytes,
    inflated when gzip or zlib (in the same layer), and as text when mostly printable."""
    seen: set[str | bytes] = {value}
    layer = [value]
    count = 0
    for depth in range(MAX_LAYERS + 1):
        following: list[str] = []
        for text in layer:
            yield text
            count += 1
            if count >= MAX_READINGS or depth == MAX_LAYERS:
                continue
            for reading in _decoded(text):
                if reading in seen:
                    continue
                seen.add(reading)
                if isinstance(reading, bytes):
                    yield reading
                else:
                    following.append(reading)
        layer = following
        if not layer:
            return


def _decoded(text: str) -> Iterator[str | bytes]:
    """What `text` says one layer down: its escapes decoded, its encoded runs as bytes (and
    their text)."""
    if "%" in text:
        yield unquote(text)
    if "&" in text:
        import html  # on first use: its entity table is 0.3 MiB, and few values have a "&"

        yield html.unescape(text)
    if "\\" in text:
        yield _ESCAPE.sub(_unescape, text)
    if not text.isascii():
        yield unicodedata.normalize("NFKC", text)
    raws = [base64_bytes(run) for run in _BASE64_RUN.findall(text)]
    raws += [bytes.fromhex(run) for run in _HEX_RUN.findall(text)]
    raws += [base64_bytes("".join(w.split())) for w in _WRAPPED_BASE64.findall(text)]
    for raw in raws:
        if raw is None:
            continue
        yield raw
        if (inflated := _inflated(raw)) is not None:
            yield inflated
            raw = inflated
        if (decoded := printable_text(raw)) is not None:
            yield decoded


def _inflated(raw: bytes) -> bytes | None:
    """`raw` decompressed (at most `MAX_INFLATED` bytes) when it is gzip or zlib."""
    if raw[:2] == b"\x1f\x8b":
        wbits = 16 + zlib.MAX_WBITS
    elif len(raw) > 1 and raw[0] & 0x0F == 8 and (raw[0] << 8 | raw[1]) % 31 == 0:
        wbits = zlib.MAX_WBITS
    else:
        return None
    try:
        return zlib.decompressobj(wbits).decompress(raw, MAX_INFLATED)
    except zlib.error:
        return None


def printable_text(raw: bytes) -> str | None:
    """The text of `raw` when at least 90 % of it is printable (a byte that is not UTF-8
    counts against it), else None."""
    text = raw.decode("utf-8", errors="replace")
    printable = sum((ch.isprintable() and ch != "\ufffd") or ch in "\n\r\t" for ch in text)
    return text if text and printable >= MIN_PRINTABLE * len(text) else None


def _unescape(match: re.Match[str]) -> str:
    return chr(int(match.group(1) or match.group(2), 16))


def base64_bytes(run: str) -> bytes | None:
    """The bytes `run` encodes in base64 (standard or URL-safe, padding optional), or None
    when it is not base64."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:  # cut short (the checked span ends inside it): drop the stray
        body = body[:-1]
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw or None
