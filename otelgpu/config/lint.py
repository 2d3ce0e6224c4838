"""Stage 4 of validation: what every component's config allows alone but the whole cannot do.

Errors: two started components listening on one port (the second would fail to bind at
start). Warnings: include lists naming keys that look like secrets. Both read the validated
models through the shared value types of `types.py` (`Endpoint` fields, `KeyFilter` fields),
never through a component's own option names.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.functional_validators import BeforeValidator

from otelgpu.component import ComponentID, Kind
from otelgpu.config.positions import Path, Positions
from otelgpu.config.types import KeyFilter, parse_endpoint, split_endpoint
from otelgpu.errors import Issue

_log = logging.getLogger("otelgpu.config")
_EVERY_INTERFACE = ("", "0.0.0.0", "::")


def port_conflicts(
    started: list[tuple[Kind, ComponentID, BaseModel]], pos: Positions
) -> list[Issue]:
    """One issue per listener whose port an earlier started component already listens on."""
    issues: list[Issue] = []
    seen: list[tuple[str, int, Path, str]] = []
    for kind, cid, model in started:
        for path, endpoint in _endpoints(model, (kind.section, str(cid))):
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
            seen.append((host, port, path, f'{kind.value} "{cid}"'))
    return issues


def warn_secret_like_includes(
    components: list[tuple[Kind, ComponentID, BaseModel]], pos: Positions
) -> None:
    """Warns, with the position, about each include pattern that looks like a secret's key."""
    filters = [
        (path, f, getattr(model, "allow_secret_like_keys", False))
        for kind, cid, model in components
        for path, f in _key_filters(model, (kind.section, str(cid)))
        if f.include
    ]
    if not filters:
        return
    # Imported only when an include list exists: the rules are container_env's public ones.
    from otelgpu.processors.container_env.secret_keys import looks_secret

    for path, key_filter, allowed in filters:
        for i, pattern in enumerate(key_filter.include):
            if not looks_secret(pattern):
                continue
            mark = pos.value((*path, "include", i))
            consequence = (
                "it will be exported (allow_secret_like_keys: true)"
                if allowed
                else "it will not be exported unless allow_secret_like_keys is true"
            )
            _log.warning(
                '%s:%d:%d: %s: "%s" looks like the key of a secret; %s',
                mark.file,
                mark.line,
                mark.column,
                "::".join(map(str, (*path, "include", i))),
                pattern,
                consequence,
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
