"""Bounds on what reaches the log: how often a recurring failure is logged, and how long a line
carrying a peer's text may be.

A peer (the kubelet, a runtime, an OTLP endpoint, a client of /metrics) controls both how often
it fails and what its error says; neither may flood the node's log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

PEER_TEXT_LIMIT = 512  # characters of a peer's error text kept in one log line


def capped(text: object, limit: int = PEER_TEXT_LIMIT) -> str:
    """`text` as a string of at most about `limit` characters, saying how much was cut."""
    value = str(text)
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value) - limit} more characters)"


class RateLimitedLog:
    """Logs one recurring condition at most once per `interval` seconds.

    The first occurrence is logged at once; later ones within the interval are only counted,
    and the next line logged says how many were left out, so nothing is silently hidden.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 60.0,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._monotonic = monotonic
        self._last: float | None = None
        self.suppressed = 0

    def log(self, level: int, message: str, *args: Any, exc_info: Any = None) -> bool:
        """Logs `message % args` unless a line was logged less than `interval` ago."""
        now = self._monotonic()
        if self._last is not None and now - self._last < self._interval:
            self.suppressed += 1
            return False
        if self.suppressed:
            message += " (%d more since the last line)"
            args = (*args, self.suppressed)
        self._last, self.suppressed = now, 0
        self._logger.log(level, message, *args, exc_info=exc_info)
        return True
