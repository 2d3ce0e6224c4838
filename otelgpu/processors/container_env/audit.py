"""The processor's own counters and its once-per-key log of refused keys (names, never values)."""

from __future__ import annotations

import logging
from collections import Counter

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.container_env.keys import SECRET_KEY, SPEC_ANNOTATION, UNSAFE_KEY
from otelgpu.processors.container_env.values import GLOB_REASONS

REFUSED = "otelgpu_container_env_refused_keys_total"
TRUNCATED = "otelgpu_container_env_truncated_values_total"
DROPPED = "otelgpu_container_env_dropped_attributes_total"
INVALID = "otelgpu_container_env_invalid_records_total"
CONTAINERS = "otelgpu_container_env_containers"

# Refused key names are logged once each; past this many distinct names a flood of odd
# keys must not grow memory or the log, so only the counter keeps going.
_MAX_LOGGED_NAMES = 1024
# A key name is logged at most this long: a 70,000-character key must not flood the log.
_MAX_LOGGED_KEY = 200

# Why a key was refused, as the log line says it; value reasons (`values.py`) share one text.
_WHY = {
    SECRET_KEY: "it looks like a secret (set allow_secret_like_keys to export it)",
    UNSAFE_KEY: "it is not plain printable ASCII (invisible or look-alike characters)",
    SPEC_ANNOTATION: "it carries a whole object spec, env values included",
}


class Audit:
    """Counts what the key rules and caps did, and logs refused key NAMES once each.

    Values never reach this class, so they can never reach a log line.
    """

    def __init__(self, processor: str, telemetry: SelfTelemetry, logger: logging.Logger) -> None:
        self._processor = processor
        self._telemetry = telemetry
        self._log = logger
        self._logged: set[tuple[str, str]] = set()  # (section, key)
        self._overflow_logged = False

    def refused(self, section: str, keys: list[str]) -> None:
        """Keys the include list asked for that were not exported, counted by reason (a key
        that is a `keys.RefusedKey` carries its reason; a plain `str` counts as secret_key)."""
        if not keys:
            return
        reasons = Counter(_reason(key) for key in keys)
        for reason, n in sorted(reasons.items()):
            self._telemetry.count(
                REFUSED,
                n,
                processor=self._processor,
                section=section,
                reason=reason,
            )
        for key in keys:
            self._log_once(section, key)

    def truncated(self, n: int) -> None:
        """Values cut to `max_value_length`."""
        self._telemetry.count(TRUNCATED, n, processor=self._processor)

    def dropped(self, n: int) -> None:
        """Attributes left out of a resource because of `max_attributes`."""
        self._telemetry.count(DROPPED, n, processor=self._processor)

    def invalid(self, runtime: str, reason: str) -> None:
        """A runtime record that could not be read completely (e.g. a malformed OCI spec)."""
        self._telemetry.count(
            INVALID,
            1,
            processor=self._processor,
            runtime=runtime,
            reason=reason,
        )

    def containers(self, runtime: str, n: int) -> None:
        """How many workload containers the latest snapshot of `runtime` holds."""
        self._telemetry.set_gauge(CONTAINERS, n, processor=self._processor, runtime=runtime)

    def _log_once(self, section: str, key: str) -> None:
        name = (section, str(key))
        if name in self._logged:
            return
        if len(self._logged) >= _MAX_LOGGED_NAMES:
            if not self._overflow_logged:
                self._overflow_logged = True
                self._log.warning(
                    "more than %d distinct keys refused; no longer logging their names",
                    _MAX_LOGGED_NAMES,
                )
            return
        self._logged.add(name)
        reason = _reason(key)
        why = _WHY.get(reason) or (
            f"it matched only a glob and its value is not plainly safe ({reason}); name the "
            "key exactly in the include list to export it (the credential checks still apply)"
            if reason in GLOB_REASONS
            else f"its value looks like a credential or a spec ({reason})"
        )
        shown = key if len(key) <= _MAX_LOGGED_KEY else key[:_MAX_LOGGED_KEY] + "..."
        self._log.warning("not exporting %s key %r: %s", section, str(shown), why)


def _reason(key: str) -> str:
    reason = getattr(key, "reason", SECRET_KEY)
    return reason if isinstance(reason, str) else SECRET_KEY
