"""The numbers of resource identities, for the series store.

Each resource identity (`ResourceMetrics.identity`: a GPU, a process, or a resource's
attributes where the receiver gave none) gets a small number, stable while it keeps reporting,
which its series carry as their owner. Numbers come in generations: `rotate` starts a new one,
and an identity unseen for a whole generation is forgotten (its series have expired by then),
so churn does not grow the table. A number is never reused.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable


class Identities:
    """Identity → number, in two generations (the current one and the one before)."""

    def __init__(self) -> None:
        self._keys: dict[Hashable, int] = {}
        self._retired: dict[Hashable, int] = {}
        self._next = 0

    def key(self, identity: Hashable) -> int:
        """The number of `identity` (stable while it keeps reporting)."""
        key = self._keys.get(identity)
        if key is None:
            key = self._retired.pop(identity, None)
            if key is None:
                key, self._next = self._next, self._next + 1
            self._keys[identity] = key
        return key

    def rotate(self) -> Iterable[int]:
        """Starts a new generation; the numbers of the identities forgotten now."""
        forgotten = self._retired.values()
        self._retired, self._keys = self._keys, {}
        return forgotten
