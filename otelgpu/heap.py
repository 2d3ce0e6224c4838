"""Keeping the cyclic garbage collector's full passes short.

What a service builds at start (components, config models, imported modules, caches) lives
until the next reload, and CPython's full (generation 2) collection walks all of it: tens of
milliseconds on a big node, taken while holding the interpreter lock, so the HTTP thread
waits too (P7). Once a service has started, everything alive is moved to the permanent
generation (`gc.freeze`), so full passes walk only what the pipeline made since.

Frozen objects that later become cyclic garbage would never be collected, so each start
first thaws the previous freeze and collects: a reload's old service is freed, not kept.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collects what is garbage now and freezes the rest; returns how many objects froze."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
