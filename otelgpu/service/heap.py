"""Keeping the cyclic garbage collector's full passes short.

What a service builds at start (components, config models, imported modules) lives until the
next reload, and CPython's full (generation 2) collection walks all of it: tens of
milliseconds on a big node, taken while holding the interpreter lock, so the HTTP thread
waits too (P7). Once a service has started, everything alive is moved to the permanent
generation (`gc.freeze`), so full passes walk only what the pipeline made since.

That is not yet the biggest part: the per-series state (the Prometheus exporter's store and
label lines, the OTLP attribute cache, the receivers' devices and pid maps, the processors'
snapshots) is built by the first collections, after start, and lives as long. Left in the
collected generations, every full pass walks it again, and full passes come more often on a
bigger node, where each cycle makes more long-lived objects: the cost per point of a cycle
grew with the node (P9, `bench/p9_cost_growth.py`, about 4x from 10k to 50k points). So the
service settles a second time once its first collection has gone through the pipeline
(`Upkeep`): the state built by then leaves the full passes too, and what a cycle costs per
point no longer depends on how much the node holds. Raising the collector's thresholds instead
would make each full pass rarer but no shorter (it would still walk every series, holding
the lock for as long), and would keep more garbage waiting between passes: a second freeze is
what takes the long-lived state out of the walk, once.

Frozen objects that later become cyclic garbage would never be collected, so each start
first thaws the previous freeze and collects: a reload's old service is freed, not kept. The
second settle of a service does not thaw (its start-up objects stay frozen; garbage among
them waits for the next start), and freezes what lives after one collection: per-series
state that later goes away (a pod deleted, a process ended) is freed by its reference count
as before; only a reference cycle within it would wait for the next start.

Freed memory is handed back to the system (`trim`): glibc's malloc returns the top of its heap
on its own, but not free pages between live blocks, which every cycle leaves behind (batches,
bodies and requests are freed in another order than they were made). `malloc_trim(0)` gives
those pages back; the service calls it after start and every `TRIM_INTERVAL` seconds
(docs/dev/memory.md has the figures). It costs about a millisecond, with the interpreter lock
released (ctypes drops it for the call), and is a no-op where the C library has no
`malloc_trim` (musl).
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable

TRIM_INTERVAL = 1.0  # seconds between upkeep ticks
SETTLE_TICKS = 5  # ticks from the first that sees a collection to the second settle


@functools.cache  # looked up on first use, not at import
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        function: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return function


def settle() -> int:
    """Thaws what an earlier settle froze, collects what is garbage now (a previous service's
    objects too) and freezes the rest; returns how many objects are frozen."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def settle_again() -> int:
    """Collects what is garbage now among the objects made since the last settle and freezes
    the rest, the earlier freeze left as it is; returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def trim() -> bool:
    """Returns the C heap's free pages to the system; whether any were returned (False also
    where the C library cannot)."""
    function = _malloc_trim()
    return bool(function(0)) if function is not None else False


def after_start(collections: Callable[[], float]) -> Upkeep:
    """What a service that has just started gets: everything alive settled, what loading and
    starting freed trimmed, and its `Upkeep` (see there for `collections`)."""
    settle()
    trim()
    return Upkeep(collections)


class Upkeep:
    """The heap upkeep of one running service, `tick`ed every `TRIM_INTERVAL` seconds. Each
    tick trims. The first tick that finds a collection made since the service started (from
    `collections`, a count that grows with each: the receivers' points) starts a count of
    `SETTLE_TICKS`, after which the upkeep settles once more, without thawing (module
    docstring): by then the collection first seen, and the few after it, have gone through the
    processors and every exporter."""

    def __init__(self, collections: Callable[[], float]) -> None:
        self._collections = collections
        self._at_start = collections()
        self._ticks = 0
        self._seen: int | None = None  # the tick that first saw a collection
        self.settled = False

    def tick(self) -> None:
        self._ticks += 1
        if not self.settled:
            if self._seen is None:
                if self._collections() > self._at_start:
                    self._seen = self._ticks
            elif self._ticks - self._seen >= SETTLE_TICKS:
                settle_again()
                self.settled = True
        trim()
