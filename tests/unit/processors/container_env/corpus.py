"""The planted-secret corpus (`tests/data/secret_corpus.yaml`) made concrete for one run: the
four sources' keys and values, and the canaries that must never leave the node."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CORPUS = Path(__file__).parents[3] / "data" / "secret_corpus.yaml"
SOURCES = ("env", "labels", "pod_labels", "annotations")


@dataclass
class Source:
    """What one source holds: every planted key, the business keys among them, and the keys
    whose secret only the plain-value rule for glob-matched keys refuses."""

    values: dict[str, str] = field(default_factory=dict)
    business: dict[str, str] = field(default_factory=dict)
    glob_only: set[str] = field(default_factory=set)

    def named(self) -> list[str]:
        """An include list naming every planted key but the glob-only ones."""
        return [key for key in self.values if key not in self.glob_only]


@dataclass
class Planted:
    """The corpus for one run: per source, what is planted; per canary, where it was."""

    sources: dict[str, Source]
    canaries: dict[str, str]  # canary text → "source:key (entry)" it was planted under

    def leaked(self, text: str | bytes) -> list[str]:
        """The planted places whose canary occurs in `text`."""
        data = text.encode() if isinstance(text, str) else text
        return sorted(where for c, where in self.canaries.items() if c.encode() in data)


def _placeholders(n: int, tag: str) -> dict[str, str]:
    c = f"canary-{n}-{tag}"
    letters = "".join(chr(ord("a") + int(ch, 16)) for ch in f"{n:02x}{tag}")
    return {
        "{c}": c,
        "{a}": f"canary{n}x{tag}",
        "{L}": f"canary{letters}",
        "{U}": f"CANARY{n % 100:02d}{tag.upper()}",
        "{h}": hashlib.md5(c.encode(), usedforsecurity=False).hexdigest(),
        "{b64}": base64.b64encode(f"deploy:{c}".encode()).decode(),
    }


def _plant(template: str, encoding: str | None, n: int, tag: str) -> tuple[str, list[str]]:
    """The value to plant and its canaries."""
    value, canaries = template, []
    for name, text in _placeholders(n, tag).items():
        if name in value:
            value = value.replace(name, text)
            canaries.append(text)
    if encoding == "base64":
        value = base64.b64encode(value.encode()).decode()
        canaries.append(value)
    elif encoding is not None:
        raise ValueError(f"unknown encoding {encoding!r}")
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
    sources: dict[str, Source] = {}
    canaries: dict[str, str] = {}
    n = 0
    for source in SOURCES:
        planted = Source(business=dict(data["business"]), glob_only=set(glob_only))
        for name, key, template, encoding in entries:
            n += 1
            value, found = _plant(template, encoding, n, tag)
            planted.values[key] = value
            canaries.update((c, f"{source}:{key} ({name})") for c in found)
        planted.values.update(planted.business)
        sources[source] = planted
    return Planted(sources, canaries)
