"""Renders docs/dev/mutation.md's table from the records (records.py)."""

from __future__ import annotations

from pathlib import Path

DOC = Path("docs/dev/mutation.md")


def write(root: Path) -> None:
    raise NotImplementedError


def check(root: Path) -> int:
    raise NotImplementedError
