"""SIGHUP from the process's first line of Python until the agent's loop takes it over.

A signal whose handler is Python's default kills the process: SIGHUP (a reload asked a little
too early, by a tool that sends it as soon as the pod runs) would end the agent with exit 129
and an empty log while it imports or reads its files. `hold` is therefore the first thing the
entry points do, before any other import: from then on a SIGHUP is remembered, never fatal,
and `Agent.run` reloads once for it as soon as it runs (the files may have changed after they
were read). `validate` and `print-config` remember it and do nothing with it.

SIGTERM and SIGINT keep their default meaning until the agent's loop installs its own
handlers: before anything has started, ending at once loses nothing.

Only stdlib `signal` is imported here, so installing the handler costs no import time.
"""

from __future__ import annotations

import signal
from types import FrameType


class HeldSignals:
    """Whether a SIGHUP came before the agent's loop handled signals itself."""

    def __init__(self) -> None:
        self.reload_asked = False

    def _remember(self, signum: int, frame: FrameType | None) -> None:
        self.reload_asked = True

    def take_reload(self) -> bool:
        """Whether a SIGHUP came since the last call (and forgets it)."""
        asked, self.reload_asked = self.reload_asked, False
        return asked

    def install(self) -> None:
        """SIGHUP is remembered from now on (again, after the agent's loop let it go)."""
        signal.signal(signal.SIGHUP, self._remember)


def hold() -> HeldSignals:
    """Installs the early SIGHUP handler (main thread only) and returns what it remembers."""
    held = HeldSignals()
    held.install()
    return held
