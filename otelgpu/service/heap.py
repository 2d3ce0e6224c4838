"""The agent's heap: the cyclic garbage collector kept off what lives long, and freed pages
handed back to the system.

What a service builds at start (components, config models, imported modules) lives until the
next reload, and CPython's full (generation 2) collection walks all of it: tens of
milliseconds on a big node, taken while holding the interpreter lock, so the HTTP thread
waits too (P7). Once a service has started, everything alive is moved to the permanent
generation (`gc.freeze`, `settle`), so full passes walk only what the pipeline made since.

The per-series state is not built yet then: the Prometheus exporter's store and label lines,
the OTLP attribute cache, the receivers' devices and pid maps, the processors' snapshots are
made by the first collections, and live as long. So the service settles a second time once
its first collections have gone through the pipeline (`Upkeep`, `settle_again`): that state
leaves the full passes too. Garbage among frozen objects is never collected, so each start
first thaws the previous freeze and collects (a reload's old service is freed, not kept); the
second settle does not thaw, and what it froze that later goes away (a pod deleted, a process
ended) is freed by its reference count as before: only a reference cycle within it would
wait for the next start. The pipeline's own objects make none (a cycle's batches, bodies and
requests are freed by their reference counts; the collector finds no garbage among them).

That leaves when full passes happen. CPython starts one every ten collections of the middle
generation, and those come with allocations: a cycle on a node five times bigger allocates
five times more, so it triggers about five times more full passes, each walking what is
alive at that moment, which includes the batch in flight, five times bigger too. The cost
per point of a cycle then grows with the node (P9: after both settles, full passes were 14 %
of a 50k-point cycle's CPU time and 1.5 % of a 10k one's). Raising the collector's threshold
would only make them rarer by a constant; while the agent runs (`collector_settings`, held by
otelgpu/service/agent.py) the collector makes no full pass of its own, and the upkeep makes
one every `FULL_PASS_TICKS` ticks (a minute): by time, not by allocation, and over what is
left outside the freezes. The young generations are collected as before, and garbage cycles
that outlive them wait a minute at most.

Freed memory is handed back to the system (`trim`): glibc's malloc returns the top of its heap
on its own, but not free pages between live blocks, which every cycle leaves behind (batches,
bodies and requests are freed in another order than they were made; container_env's refresh
parses every container's spec, a few MiB, every 10 s). `malloc_trim(0)` gives those pages
back; the upkeep calls it after start and at every tick, each second: every five seconds, the
small node's median RSS was 1 MiB higher, the refresh's pages held for up to five seconds of
every ten (docs/dev/memory.md has the figures). It costs about a millisecond, with the
interpreter lock released (ctypes drops it for the call), and is a no-op where the C library
has no `malloc_trim` (musl).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
from collections.abc import Callable, Iterator

TRIM_INTERVAL = 1.0  # seconds between upkeep ticks
SETTLE_TICKS = 5  # ticks from the first that sees a collection to the second settle
FULL_PASS_TICKS = 60  # ticks between the upkeep's full collections: a minute
_NEVER = 2**31 - 1  # the largest threshold CPython takes: no full pass of its own


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


@contextlib.contextmanager
def collector_settings() -> Iterator[None]:
    """While it holds, the collector makes no full pass of its own (its third threshold out of
    reach; the young generations are collected as before): the upkeep makes one every
    `FULL_PASS_TICKS` ticks instead (module docstring). The thresholds are put back on the way
    out. Process-wide: the agent's to hold while it runs (otelgpu/service/agent.py)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], _NEVER)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def after_start(collections: Callable[[], float]) -> Upkeep:
    """What a service that has just started gets: everything alive settled, what loading and
    starting freed trimmed, and its `Upkeep` (see there for `collections`)."""
    settle()
    trim()
    return Upkeep(collections)


class Upkeep:
    """The heap upkeep of one running service, `tick`ed every `TRIM_INTERVAL` seconds. Each
    tick trims; every `FULL_PASS_TICKS`th makes a full collection. The first tick that finds a
    collection made since the service started (from `collections`, a count that grows with
    each: the receivers' points) starts a count of `SETTLE_TICKS`, after which the upkeep
    settles once more, without thawing (module docstring): by then the collection first seen,
    and the few after it, have gone through the processors and every exporter."""

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
        if self._ticks % FULL_PASS_TICKS == 0:
            gc.collect()
        trim()
