"""The agent's own log output: console lines or JSON objects, one per line, on stderr.

Until the configuration is loaded nobody knows how to log, yet loading it logs (warnings about
unused components, include lists...). `hold` keeps those records; the first `configure`
writes them in the configured form, so with JSON logs every line is JSON, the first one too.
"""

from __future__ import annotations

import json
import logging
import sys
import time

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
ENCODINGS = ("console", "json")


class _JsonFormatter(logging.Formatter):
    """`{"ts": "2026-11-23T03:04:05.678Z", "level": "warn", "logger": ..., "msg": ...}`:
    UTC with milliseconds, and the level names the Collector's logs use."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": _utc_millis(record.created),
            "level": "warn" if record.levelno == logging.WARNING else record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class _ConsoleFormatter(logging.Formatter):
    """`2026-11-23T03:04:05.678Z WARNING otelgpu.config: ...` (UTC, milliseconds)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc_millis(record.created)


def _utc_millis(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created * 1000) % 1000:03d}Z"


class _Held(logging.Handler):
    """Keeps records until `configure` knows how to write them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def hold() -> None:
    """Keeps every record of the `otelgpu` loggers until the next `configure`."""
    root = logging.getLogger("otelgpu")
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(_Held())
    root.setLevel(logging.DEBUG)
    root.propagate = False


def configure(level: str = "info", encoding: str = "console") -> None:
    """(Re)configures the `otelgpu` logger tree; safe to call again on reload. Records kept
    since `hold` are written first, those below `level` dropped."""
    handler = logging.StreamHandler(sys.stderr)
    if encoding == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(_ConsoleFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger("otelgpu")
    held = [r for h in root.handlers if isinstance(h, _Held) for r in h.records]
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS.get(level.lower(), logging.INFO))
    root.propagate = False
    for record in held:
        if record.levelno >= root.level:
            handler.handle(record)
