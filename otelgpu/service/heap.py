"""Keeping the cyclic garbage collector's full passes short.

What a service builds at start (components, config models, imported modules, caches) lives
until the next reload, and CPython's full (generation 2) collection walks all of it: tens of
milliseconds on a big node, taken while holding the interpreter lock, so the HTTP thread
waits too (P7). Once a service has started, everything alive is moved to the permanent
generation (`gc.freeze`), so full passes walk only what the pipeline made since.

Frozen objects that later become cyclic garbage would never be collected, so each start
first thaws the previous freeze and collects: a reload's old service is freed, not kept.

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

TRIM_INTERVAL = 5.0  # seconds


@functools.cache  # looked up on first use, not at import
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        function: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return function


def settle() -> int:
    """Collects what is garbage now and freezes the rest; returns how many objects froze."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def trim() -> bool:
    """Returns the C heap's free pages to the system; whether any were returned (False also
    where the C library cannot)."""
    function = _malloc_trim()
    return bool(function(0)) if function is not None else False
