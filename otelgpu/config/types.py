"""Value types shared by component configs: durations, sizes, endpoints, include/exclude lists."""

from __future__ import annotations

import fnmatch
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from otelgpu.config.suggest import closest

_DURATION_RE = re.compile(r"^(?:(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE_RE = re.compile(r"^(\d+)\s*(B|KB|MB|GB|KiB|MiB|GiB)?$")
_SIZE_UNITS = {
    None: 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
}


# Beyond these a value is a typo (or an attack), and can overflow timers and thread waits.
MAX_DURATION = 7 * 24 * 3600.0
MAX_SIZE = 2**40


def parse_duration(value: Any) -> float:
    """`500ms`, `10s`, `1m30s` → seconds, at most 7 days. Bare numbers are refused: the unit
    must be said."""
    if not (isinstance(value, str) and _DURATION_RE.match(value.strip())):
        raise ValueError(
            f"invalid duration {_shown(value)}: expected a number with a unit, "
            "such as 500ms, 10s or 5m"
        )
    parts = _DURATION_PART.findall(value.strip())
    seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)  # float: never overflows
    if not seconds <= MAX_DURATION:  # also catches inf from hundreds of digits
        raise ValueError(f"duration {_shown(value)} is too long: at most 168h (7 days)")
    return seconds


def format_duration(seconds: float) -> str:
    """Seconds → the shortest exact duration string (used by print-config)."""
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 3600:g}h" if seconds % 3600 == 0 else f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def parse_size(value: Any) -> int:
    """`64MiB`, `512KiB`, `1000` → bytes, at most 1024GiB."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        size = value
    else:
        match = _SIZE_RE.match(value.strip()) if isinstance(value, str) else None
        if match is None:
            raise ValueError(
                f"invalid size {_shown(value)}: expected bytes or a number with a unit, "
                "such as 64MiB"
            )
        digits = match.group(1).lstrip("0") or "0"
        if len(digits) > 15:  # int() refuses thousands of digits; anything this long is absurd
            raise ValueError(f"size {_shown(value)} is too large: at most 1024GiB")
        size = int(digits) * _SIZE_UNITS[match.group(2)]
    if size > MAX_SIZE:
        raise ValueError(f"size {_shown(value)} is too large: at most 1024GiB")
    return size


def _shown(value: Any) -> str:
    """A value quoted for an error message, cut so a huge value cannot flood the log."""
    try:
        text = str(value)
    except ValueError:  # an int of more digits than Python will print
        text = "<a number of thousands of digits>"
    return f'"{text}"' if len(text) <= 60 else f'"{text[:57]}..."'


# Seconds as float; positive unless a field says otherwise.
Duration = Annotated[
    float, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)
]
PositiveDuration = Annotated[Duration, Field(gt=0)]
Size = Annotated[int, BeforeValidator(parse_size)]


class StrictModel(BaseModel):
    """Base of every config model: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def config_notes(self) -> tuple[str, ...]:
        """What `otelgpu validate` prints beside a valid component config (what a file it
        names asks for that cannot be done as asked); none by default."""
        return ()

    def config_warnings(self) -> tuple[tuple[tuple[str | int, ...], str], ...]:
        """What this valid component config asks for that cannot be done as asked: (the key
        path within the component, the message) pairs, logged with their position on every
        load (validate, run, reload); none by default."""
        return ()


class KeyFilter(StrictModel):
    """`{include: [...], exclude: [...]}` of exact keys or globs (`MLFLOW_*`).

    A key passes when it matches an include pattern and no exclude pattern. The include list
    is empty by default: nothing passes unless asked for.
    """

    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    def allows(self, key: str) -> bool:
        """Whether `key` is included and not excluded."""
        return _matches(key, self.include) and not _matches(key, self.exclude)


def _matches(key: str, patterns: list[str]) -> bool:
    return any(p == key or fnmatch.fnmatchcase(key, p) for p in patterns)


def parse_endpoint(value: Any) -> str:
    """`host:port` (`0.0.0.0:9400`, `[::1]:9400`, `localhost:13133`), checked but kept as text.
    `:9400` (no host) listens on every interface, IPv4 and IPv6, as in the Collector."""
    if isinstance(value, str):
        _, sep, port = value.rpartition(":")
        if sep and port.isdigit() and 0 <= int(port) <= 65535:
            return value
    raise ValueError(f'invalid endpoint "{value}": expected host:port, such as 0.0.0.0:9400')


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """`host:port` → (host, port), brackets removed from IPv6 hosts; the host is "" (every
    interface, for asyncio) when the endpoint names none."""
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


Endpoint = Annotated[str, BeforeValidator(parse_endpoint)]


class MetricToggle(StrictModel):
    """`metrics::<name>`: switches one catalog metric on or off."""

    enabled: bool


def check_metric_names(toggles: dict[str, MetricToggle], catalog: list[str]) -> None:
    """Refuses switches for metrics a receiver's catalog does not have: each with the nearest
    catalog name when one is near (a typo), else where the catalog is listed (not all of it)."""
    known = set(catalog)
    unknown = sorted(name for name in toggles if name not in known)
    if unknown:
        each = []
        for name in unknown:
            match = closest(name, catalog)
            each.append(f'"{name}"' + (f' (did you mean "{match}"?)' if match else ""))
        raise ValueError(
            f"unknown metric {', '.join(each)}: not one of this receiver's {len(catalog)} "
            "metrics (docs/metrics.md, docs/kubelet_stats.md)"
        )
