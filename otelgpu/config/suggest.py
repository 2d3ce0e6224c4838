"""'did you mean' for a name that is a near miss of a valid one (a typo, a British spelling)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How alike two names must be (difflib's ratio): `namming` / `naming` is 0.92, `utilisation` /
# `utilization` 0.91, `prometheus` / `promethues` 0.9; unrelated names of similar length
# (`timeout` / `endpoint`) stay below.
_CUTOFF = 0.8


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name nearest to `name`, when one is near enough to be what was meant."""
    found = difflib.get_close_matches(name, list(valid), n=1, cutoff=_CUTOFF)
    return found[0] if found else None


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """`; did you mean "x"?`, to follow a message, or "" when nothing is near."""
    match = closest(name, valid)
    return f'; did you mean "{match}"?' if match else ""
