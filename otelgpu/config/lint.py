"""Stage 4 of validation: what every component's config allows alone but the whole cannot do.

Errors: two started components listening on one port (the second would fail to bind at
start); an exporter whose series expire before the receivers feeding it collect twice (its
`/metrics` would empty between collections). Warnings: include lists naming keys that look like
secrets. Ports and include lists are read through the shared value types of `types.py`
(`Endpoint` fields, `KeyFilter` fields); expiry through the Collector's option names
`collection_interval` (every scraping receiver's) and `metric_expiration`, never through a
component's type.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.functional_validators import BeforeValidator

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.errors import Issue
from otelgpu.config.pipeline import Pipeline
from otelgpu.config.positions import Path, Positions
from otelgpu.config.types import KeyFilter, format_duration, parse_endpoint, split_endpoint

_log = logging.getLogger("otelgpu.config")
_EVERY_INTERFACE = ("", "0.0.0.0", "::")
# The Collector's names: a scraping receiver's period, and how long an exporter that serves the
# last value of each series keeps one that no batch has updated.
_INTERVAL, _EXPIRATION = "collection_interval", "metric_expiration"


def port_conflicts(
    started: list[tuple[Kind, ComponentID, BaseModel]],
    pos: Positions,
    more: Iterable[tuple[Path, str, str]] = (),
) -> list[Issue]:
    """One issue per listener whose port an earlier one already listens on: the started
    components' endpoints, then `more` listeners (path of the port, `host:port`, who)."""
    listeners = [
        (path, endpoint, f'{kind.value} "{cid}"')
        for kind, cid, model in started
        for path, endpoint in _endpoints(model, (kind.section, str(cid)))
    ]
    issues: list[Issue] = []
    seen: list[tuple[str, int, Path, str]] = []
    for path, endpoint, who in (*listeners, *more):
        host, port = split_endpoint(endpoint)
        if port == 0:  # any free port: never a conflict
            continue
        for other_host, other_port, other_path, other in seen:
            if port == other_port and _overlap(host, other_host):
                mark, first = pos.value(path), pos.value(other_path)
                message = (
                    f"port {port} is already listened on by {other} "
                    f"({first.file}:{first.line}:{first.column}); two components cannot "
                    "share a port: change one endpoint"
                )
                issues.append(Issue(mark.file, mark.line, mark.column, path, message))
                break
        seen.append((host, port, path, who))
    return issues


def expiring_before_collection(
    pipelines: Iterable[Pipeline],
    receivers: Mapping[ComponentID, BaseModel],
    exporters: Mapping[ComponentID, BaseModel],
    pos: Positions,
) -> list[Issue]:
    """One issue per exporter whose `metric_expiration` is shorter than twice the longest
    `collection_interval` of the receivers of the pipelines feeding it: a series must outlive
    a late collection, or `/metrics` empties between two. Receivers without an interval (and
    components whose own options were refused) are left out."""
    longest: dict[ComponentID, tuple[float, ComponentID, ComponentID]] = {}
    for pipeline in pipelines:
        for rid in pipeline.receivers:
            interval = getattr(receivers.get(rid), _INTERVAL, None)
            if not isinstance(interval, float):
                continue
            for eid in pipeline.exporters:
                if eid not in longest or interval > longest[eid][0]:
                    longest[eid] = (interval, rid, pipeline.id)
    issues: list[Issue] = []
    for eid, (interval, rid, pid) in longest.items():
        expiration = getattr(exporters.get(eid), _EXPIRATION, None)
        if not isinstance(expiration, float) or _ns(expiration) >= 2 * _ns(interval):
            continue
        path = ("exporters", str(eid), _EXPIRATION)
        written = path in pos.values
        mark = pos.value(path) if written else pos.key(path[:2])
        shown = format_duration(expiration)
        if not written:
            shown = f"the default {shown} (not set)"
        message = (
            f"{shown} is shorter than twice the {_INTERVAL} of receiver "
            f'"{rid}" ({_interval_at(rid, interval, pos)}), which feeds this exporter in '
            f'pipeline "{pid}": its series would expire between two collections and vanish '
            f"from /metrics; set {_EXPIRATION} to at least {format_duration(2 * interval)} "
            "(or collect more often)"
        )
        issues.append(Issue(mark.file, mark.line, mark.column, path, message))
    return issues


def _interval_at(rid: ComponentID, interval: float, pos: Positions) -> str:
    path = ("receivers", str(rid), _INTERVAL)
    if path in pos.values:
        at = pos.value(path)
        return f"{format_duration(interval)} at {at.file}:{at.line}:{at.column}"
    at = pos.key(path[:2])
    return f"the default {format_duration(interval)}, not set at {at.file}:{at.line}:{at.column}"


def _ns(seconds: float) -> int:
    """Whole nanoseconds (the finest duration unit), so `2 * 100ms` equals `200ms`."""
    return round(seconds * 1e9)


def warn_what_cannot_be_done_as_asked(
    components: list[tuple[Kind, ComponentID, BaseModel]], pos: Positions
) -> None:
    """Each started component's `config_warnings`, logged with the position of the key it
    names (validate, run and every reload)."""
    for kind, cid, model in components:
        warnings = getattr(model, "config_warnings", None)
        if warnings is None:
            continue
        for path, message in warnings():
            at = (kind.section, str(cid), *path)
            mark = pos.value(at)
            _log.warning(
                "%s:%d:%d: %s: %s",
                mark.file,
                mark.line,
                mark.column,
                "::".join(map(str, at)),
                message,
            )


def warn_include_everything(
    components: list[tuple[Kind, ComponentID, BaseModel]], pos: Positions
) -> None:
    """`include: ["*"]` is valid, but it hands the choice of what leaves the node to rules:
    says so, with the position, and what they refuse, every time such a config is loaded
    (validate, run, reload)."""
    for kind, cid, model in components:
        for path, key_filter in _key_filters(model, (kind.section, str(cid))):
            section = path[-1]
            for i, pattern in enumerate(key_filter.include):
                if not pattern or set(pattern) != {"*"}:
                    continue
                at = (*path, "include", i)
                mark = pos.value(at)
                _log.warning(
                    '%s:%d:%d: %s: include ["*"] hands %s keys to rules: a key the include '
                    "list does not name is exported only when its value is plainly safe: at "
                    "most 64 characters of letters, digits, spaces and ._/:-, with no option "
                    "(-x), no secret-like word and nothing random-looking (tokens, hex IDs, "
                    "UUIDs). Other values are refused, as are secret-like keys and "
                    "credential-like values, and counted in "
                    'otelgpu_container_env_refused_keys_total{reason="glob_..."} (README, '
                    "Security); name a key in the include list to export a value this refuses",
                    mark.file,
                    mark.line,
                    mark.column,
                    "::".join(map(str, at)),
                    section,
                )
                break


def warn_secret_like_includes(
    components: list[tuple[Kind, ComponentID, BaseModel]], pos: Positions
) -> None:
    """Warns, with the position, about each include pattern that looks like a secret's key,
    and each key an include list names that will be refused by its name, and why."""
    filters = [
        (path, f, getattr(model, "allow_secret_like_keys", False))
        for kind, cid, model in components
        for path, f in _key_filters(model, (kind.section, str(cid)))
        if f.include
    ]
    if not filters:
        return
    # Imported only when an include list exists (the rules container_env refuses keys by).
    from otelgpu.config.secret_keys import (
        SPEC_ANNOTATION,
        UNSAFE_KEY,
        key_refusal,
        looks_secret,
    )

    never = {
        UNSAFE_KEY: "it is not plain printable ASCII (a look-alike or invisible character)",
        SPEC_ANNOTATION: "it carries a whole object spec, env values included",
    }
    for path, key_filter, allowed in filters:
        for i, pattern in enumerate(key_filter.include):
            named = not any(ch in pattern for ch in "*?[")
            reason = key_refusal(pattern) if named else None
            if reason in never:
                consequence = f"will never be exported (reason {reason}): {never[reason]}"
                _warn(pos, (*path, "include", i), pattern, consequence)
                continue
            if not looks_secret(pattern):
                continue
            consequence = (
                "it will be exported (allow_secret_like_keys: true)"
                if allowed
                else "it will not be exported unless allow_secret_like_keys is true"
            )
            _warn(
                pos,
                (*path, "include", i),
                pattern,
                f"looks like the key of a secret; {consequence}",
            )


def _warn(pos: Positions, path: tuple[str | int, ...], pattern: str, message: str) -> None:
    mark = pos.value(path)
    _log.warning(
        '%s:%d:%d: %s: "%s" %s',
        mark.file,
        mark.line,
        mark.column,
        "::".join(map(str, path)),
        pattern,
        message,
    )


def _overlap(a: str, b: str) -> bool:
    return a == b or a in _EVERY_INTERFACE or b in _EVERY_INTERFACE


def _endpoints(model: BaseModel, path: Path) -> Iterator[tuple[Path, str]]:
    """(path, value) of every listen address (`Endpoint` field) in `model`, nested too."""
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            yield from _endpoints(value, (*path, name))
        elif isinstance(value, str) and any(_is_endpoint(m) for m in field.metadata):
            yield (*path, name), value


def _is_endpoint(metadata: Any) -> bool:
    return isinstance(metadata, BeforeValidator) and metadata.func is parse_endpoint


def _key_filters(model: BaseModel, path: Path) -> Iterator[tuple[Path, KeyFilter]]:
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, KeyFilter):
            yield (*path, name), value
        elif isinstance(value, BaseModel):
            yield from _key_filters(value, (*path, name))
