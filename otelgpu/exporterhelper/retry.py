"""When to send a failed request again: exponential backoff with jitter, bounded in time."""

from __future__ import annotations

import random
from collections.abc import Callable

from otelgpu.component.errors import ExportError
from otelgpu.exporterhelper.config import RetryConfig


class Backoff:
    """The waits between attempts of one request: each `multiplier` times the last (up to
    `max_interval`), randomised by ±`randomization_factor` so that many agents restarted
    together do not retry in step.

    `next_delay` returns None when the request must be given up: the error is permanent,
    retrying is disabled, or the next wait would end past `max_elapsed_time` (0 = never).
    A delay the server asked for replaces a shorter computed one, as the Collector does.
    """

    def __init__(
        self,
        config: RetryConfig,
        started: float,
        *,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._config = config
        self._started = started
        self._interval = config.initial_interval
        self._rand = rand

    def next_delay(self, error: ExportError, now: float) -> float | None:
        """Seconds to wait before the next attempt after `error` at time `now`, or None."""
        config = self._config
        if not (config.enabled and error.retryable):
            return None
        jitter = config.randomization_factor
        delay = self._interval * (1 - jitter + 2 * jitter * self._rand())
        self._interval = min(self._interval * config.multiplier, config.max_interval)
        if error.retry_after is not None:
            delay = max(delay, error.retry_after)
        if config.max_elapsed_time and now + delay - self._started > config.max_elapsed_time:
            return None
        return delay
