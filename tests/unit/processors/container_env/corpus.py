"""The planted-secret corpus (`tests/data/secret_corpus.yaml`) made concrete for one run: the
four sources' keys and values, and the canaries that must never leave the node."""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

CORPUS = Path(__file__).parents[3] / "data" / "secret_corpus.yaml"
SOURCES = ("env", "labels", "pod_labels", "annotations")


@dataclass
class Source:
    """What one source holds: every planted key, the business keys among them, the ordinary
    values (exported whole when named, perhaps refused under a glob), and the keys whose
    secret only the plain-value rule for glob-matched keys refuses."""

    values: dict[str, str] = field(default_factory=dict)
    business: dict[str, str] = field(default_factory=dict)
    ordinary: dict[str, str] = field(default_factory=dict)
    glob_only: set[str] = field(default_factory=set)

    def named(self) -> list[str]:
        """An include list naming every planted key but the glob-only ones."""
        return [key for key in self.values if key not in self.glob_only]

    def globs(self) -> list[str]:
        """An include list that names no key: one glob with a literal part per first
        character of the planted keys (`D*` for `DB_PASS`, `DBPWD`, ...)."""
        return sorted({f"{key[0]}*" for key in self.values})

    def secrets(self) -> dict[str, str]:
        """The planted keys that hold a secret (neither business nor ordinary)."""
        return {
            k: v
            for k, v in self.values.items()
            if k not in self.business and k not in self.ordinary
        }


@dataclass
class Planted:
    """The corpus for one run: per source, what is planted; per canary, where it was."""

    sources: dict[str, Source]
    canaries: dict[str, str]  # canary text → "source:key (entry)" it was planted under

    def leaked(self, text: str | bytes) -> list[str]:
        """The planted places whose canary occurs in `text`."""
        data = text.encode() if isinstance(text, str) else text
        return sorted(where for c, where in self.canaries.items() if c.encode() in data)


_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
_WORDS = ("orbit", "meadow", "lantern", "copper", "violet", "harbour", "pepper", "glacier")


def _digits(seed: str, alphabet: str, n: int) -> str:
    """`n` characters of `alphabet` drawn from the hash of `seed` (the same every run)."""
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest() * 2, "big")
    out = []
    for _ in range(n):
        number, i = divmod(number, len(alphabet))
        out.append(alphabet[i])
    return "".join(out)


def _placeholders(n: int, tag: str) -> dict[str, str]:
    c = f"canary-{n}-{tag}"
    letters = "".join(chr(ord("a") + int(ch, 16)) for ch in f"{n:02x}{tag}")
    md5 = hashlib.md5(c.encode(), usedforsecurity=False)
    group = _digits(c + "G", _BASE62[:36], 16).upper()
    words = [_WORDS[int(ch, 16) % len(_WORDS)] for ch in md5.hexdigest()[:3]]
    return {
        "{c}": c,
        "{a}": f"canary{n}x{tag}",
        "{L}": f"canary{letters}",
        "{U}": f"CANARY{n % 100:02d}{tag.upper()}",
        "{h}": md5.hexdigest(),
        "{b64}": base64.b64encode(f"deploy:{c}".encode()).decode(),
        "{r}": _digits(c, _BASE62, 16),
        "{G}": "-".join(group[i : i + 4] for i in range(0, 16, 4)),
        "{hc}": ":".join(f"{b:02x}" for b in md5.digest()),
        "{D}": ".".join(_digits(c + f"D{i}", _BASE62[:36], 4).lower() for i in range(4)),
        "{k6}": _digits(c + "k6", _BASE62[:36], 6).lower(),
        "{k16}": _digits(c + "k16", _BASE62[:36], 16).lower(),
        "{AGE}": _digits(c + "age", _BECH32, 58),
        "{w}": " ".join([*words, f"canary{letters}"]),
    }


def _encoded(text: str, encoding: str) -> str:
    """`text` through the chain of steps `encoding` names (see the corpus file)."""
    steps = encoding.split("+")
    data = text.encode("latin-1") if steps[0] == "latin1" else text.encode()
    for step in steps[1:] if steps[0] == "latin1" else steps:
        if step == "gzip":
            data = gzip.compress(data, mtime=0)
        elif step == "zlib":
            data = zlib.compress(data)
        elif step == "base64":
            data = base64.b64encode(data)
        elif step == "base64url":
            data = base64.urlsafe_b64encode(data).rstrip(b"=")
        elif step == "hex":
            data = data.hex().encode()
        elif step == "percent":
            data = quote(data, safe="").encode()
        elif step == "html":
            data = html.escape(data.decode()).encode()
        elif step == "uescape":
            data = "".join(f"\\u{ord(ch):04x}" for ch in data.decode()).encode()
        elif step == "xescape":
            data = "".join(f"\\x{b:02x}" for b in data).encode()
        elif step == "lines":
            data = b"\n".join(data[i : i + 64] for i in range(0, len(data), 64))
        else:
            raise ValueError(f"unknown encoding step {step!r}")
    return data.decode()


def _plant(template: str, encoding: str | None, n: int, tag: str) -> tuple[str, list[str]]:
    """The value to plant and its canaries."""
    value, canaries = template, []
    for name, text in _placeholders(n, tag).items():
        if name in value:
            value = value.replace(name, text)
            canaries.append(text)
    if encoding is not None:
        value = _encoded(value, encoding)
        canaries.append(value)
    return value, canaries or [value]


def load(tag: str) -> Planted:
    """The corpus with canaries made unique by `tag` (8 hex digits) and by place."""
    data: dict[str, Any] = yaml.safe_load(CORPUS.read_text())
    glob_only: dict[str, str] = {
        f"GLOB_{i:02d}": template for i, template in enumerate(data["glob_only_values"].values())
    }
    names = {f"GLOB_{i:02d}": name for i, name in enumerate(data["glob_only_values"])}
    entries: list[tuple[str, str, str, str | None]] = [
        *((key, key, "{c}", None) for key in data["secret_keys"]),
        *((key, key, spec, None) for key, spec in data["spec_keys"].items()),
    ]
    for i, (name, entry) in enumerate(data["secret_values"].items()):
        template, encoding = (
            (entry["value"], entry.get("encoding")) if isinstance(entry, dict) else (entry, None)
        )
        # A key that says nothing: only the value can give the secret away.
        entries.append((name, f"SETTING_{i:02d}", template, encoding))
    entries += [(names[key], key, template, None) for key, template in glob_only.items()]
    entries += [(key, key, template, None) for key, template in data["secret_key_values"].items()]
    ordinary = {f"VALUE_{i:02d}": str(value) for i, value in enumerate(data["ordinary_values"])}
    sources: dict[str, Source] = {}
    canaries: dict[str, str] = {}
    n = 0
    for source in SOURCES:
        planted = Source(
            business=dict(data["business"]), ordinary=dict(ordinary), glob_only=set(glob_only)
        )
        for name, key, template, encoding in entries:
            n += 1
            value, found = _plant(template, encoding, n, tag)
            planted.values[key] = value
            canaries.update((c, f"{source}:{key} ({name})") for c in found)
        planted.values.update(planted.business)
        planted.values.update(planted.ordinary)
        sources[source] = planted
    return Planted(sources, canaries)
