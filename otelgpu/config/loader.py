"""Reads pipeline files into one plain dict plus the position of every key and value.

Stage 1 of validation: YAML syntax, duplicate keys, `${env:…}`, `${…}` and `${file:…}`
expansion on parsed scalars (never on raw text, so a value can never inject YAML), merging
several `-c` files in order and applying `--set` overrides. `composer.py` bounds nesting and
keeps alias uses apart; `walker.py` checks tags and charges alias expansion to a budget. Every
YAML problem becomes one located issue. A file that cannot be parsed at all stops here; issues
inside a parsed file (a duplicate key, an unset variable) travel on in `RawConfig.issues`, so
`schema.py` reports them together with the component-level ones.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from otelgpu.component.errors import ConfigError, Issue
from otelgpu.config.bounded_read import Unreadable, read_bounded
from otelgpu.config.composer import MAX_DEPTH, Composed, NestingTooDeep, compose
from otelgpu.config.positions import Mark, Path, Positions
from otelgpu.config.walker import Walker


@dataclass
class RawConfig:
    """The merged document and where each part of it came from."""

    data: dict[str, Any] = field(default_factory=dict)
    positions: Positions = field(default_factory=Positions)
    # Problems found while reading a document that still parsed: reported by `validate`.
    issues: list[Issue] = field(default_factory=list)
    damaged: set[Path] = field(default_factory=set)  # values those issues replaced
    sources: list[str] = field(default_factory=list)  # file names, in `-c` order


def sort_issues(issues: list[Issue], sources: list[str]) -> list[Issue]:
    """Issues by file (in `-c` order, then `--set` overrides), line and column."""
    order = {name: n for n, name in enumerate(sources)}
    return sorted(issues, key=lambda i: (order.get(i.file, len(order)), i.file, i.line, i.column))


def load(
    sources: list[tuple[str, str]],
    overrides: list[str] = (),  # type: ignore[assignment]
    environ: Mapping[str, str] | None = None,
) -> RawConfig:
    """Parses `(name, text)` sources in order, then `--set` overrides. Raises ConfigError
    listing every problem when a source cannot be parsed at all; otherwise the problems found
    inside parsed sources are in `issues`, for `validate` to report with its own."""
    env = os.environ if environ is None else environ
    merged = RawConfig(sources=[name for name, _ in sources])
    merged.sources += [f"--set #{n}" for n in range(1, len(overrides) + 1)]
    if sources:  # errors about what is missing altogether point at the first file
        merged.positions.values[()] = Mark(sources[0][0], 1, 1)
    unparsed = False
    for name, text in sources:
        part = _parse_document(name, text, env, merged.issues, merged.damaged)
        unparsed |= part is None
        if part is not None:
            _merge(merged, part, ())
    for n, override in enumerate(overrides, start=1):
        part = _parse_override(f"--set #{n}", override, env, merged.issues, merged.damaged)
        unparsed |= part is None
        if part is not None:
            _merge(merged, part, ())
    if unparsed:
        raise ConfigError(sort_issues(merged.issues, merged.sources))
    return merged


def read_files(paths: list[str]) -> list[tuple[str, str]]:
    """Reads each `-c` source; a missing or unreadable file is a config error, not a crash,
    and so is one that is not a regular file, holds more than `MAX_CONFIG_FILE` bytes or takes
    over `bounded_read.READ_TIMEOUT` to read (each would hang or swell a reload otherwise).

    As the Collector's `--config` does, a source may be a URI: `file:PATH` is the file, and
    `yaml:TEXT` is YAML given inline, whose keys may name a path with `::`
    (`yaml:exporters::debug::verbosity: detailed`)."""
    sources: list[tuple[str, str]] = []
    issues: list[Issue] = []
    for n, path in enumerate(paths, start=1):
        scheme, sep, rest = path.partition(":")
        if sep and scheme == "yaml":
            name = f"-c yaml #{n}"
            text = _inline_yaml(name, rest, issues)
            if text is not None:
                sources.append((name, text))
            continue
        if sep and scheme in _UNSUPPORTED_SCHEMES:
            issues.append(
                Issue(path, 1, 1, (), f"the {scheme}: config source is not supported here; "
                      "use file:PATH, a path, or yaml:TEXT")
            )  # fmt: skip
            continue
        if sep and scheme == "file":
            path = rest
        try:
            sources.append((path, read_bounded(path, MAX_CONFIG_FILE).decode("utf-8")))
        except (Unreadable, UnicodeDecodeError) as exc:
            issues.append(Issue(path, 1, 1, (), f"cannot read the file: {exc}"))
    if issues:
        raise ConfigError(issues)
    return sources


# A pipeline file is a few KiB; anything near this is a wrong path (a log, an image).
MAX_CONFIG_FILE = 4 * 2**20
# The Collector's other config providers: they fetch configuration from elsewhere.
_UNSUPPORTED_SCHEMES = frozenset({"env", "http", "https", "s3", "secretsmanager"})


def _inline_yaml(name: str, text: str, issues: list[Issue]) -> str | None:
    """`yaml:` text as a YAML document, with `a::b::c: v` keys written as nested mappings."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        issues.append(Issue(name, 1, 1, (), f"not YAML: {exc}"))
        return None
    if not isinstance(data, dict):
        issues.append(Issue(name, 1, 1, (), "expected a mapping, such as a::b::c: value"))
        return None
    return str(yaml.safe_dump(_nested(data), sort_keys=False))


def _nested(data: dict[Any, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in data.items():
        parts = key.split("::") if isinstance(key, str) else [key]
        value = _nested(value) if isinstance(value, dict) else value
        for part in reversed(parts[1:]):
            value = {part: value}
        _deep_merge(out, parts[0], value)
    return out


def _deep_merge(into: dict[Any, Any], key: Any, value: Any) -> None:
    current = into.get(key)
    if isinstance(current, dict) and isinstance(value, dict):
        for k, v in value.items():
            _deep_merge(current, k, v)
    else:
        into[key] = value


def _parse_document(
    name: str, text: str, env: Mapping[str, str], issues: list[Issue], damaged: set[Path]
) -> RawConfig | None:
    composed = _compose(name, text, issues)
    if composed is None:
        return None
    out = RawConfig()
    node = composed.root
    if node is None:
        return out
    if not isinstance(node, yaml.MappingNode):
        m = node.start_mark
        issues.append(
            Issue(
                name,
                m.line + 1,
                m.column + 1,
                (),
                "the file must be a mapping of sections (receivers, exporters, service, ...)",
            )
        )
        return None
    data = Walker(name, composed, env, out.positions, issues, damaged=damaged).walk(node, ())
    if not isinstance(data, dict):  # the walk was refused (an alias bomb): nothing is usable
        return None
    out.data = data
    return out


def _parse_override(
    name: str, override: str, env: Mapping[str, str], issues: list[Issue], damaged: set[Path]
) -> RawConfig | None:
    key, sep, value = override.partition("=")
    sep_token = "::" if "::" in key else "."
    path = tuple(p for p in key.strip().split(sep_token))
    if not sep or not key.strip() or any(not p for p in path):
        text = override if len(override) <= 60 else override[:57] + "..."
        issues.append(Issue(name, 1, 1, (), f'expected --set key.path=value (got "{text}")'))
        return None
    if len(path) > MAX_DEPTH:
        issues.append(Issue(name, 1, 1, (), f"nesting deeper than {MAX_DEPTH} levels"))
        return None
    offset = len(key) + 1  # the value's column within the override
    composed = _compose(name, value or '""', issues, path, offset)
    if composed is None:
        return None
    out = RawConfig()
    walker = Walker(
        name, composed, env, out.positions, issues, column_offset=offset, damaged=damaged
    )
    leaf: Any = walker.walk(composed.root, path) if composed.root is not None else None
    for part in reversed(path):
        leaf = {part: leaf}
    out.data = leaf
    mark = Mark(name, 1, 1)
    for n in range(1, len(path) + 1):
        out.positions.values.setdefault(path[:n], mark)
        out.positions.keys.setdefault(path[:n], mark)
    return out


def _compose(
    name: str, text: str, issues: list[Issue], path: Path = (), offset: int = 0
) -> Composed | None:
    """The composed document, or None after recording one located issue for the YAML error."""
    try:
        return compose(text)
    except NestingTooDeep as exc:
        issues.append(_located(name, text, exc.problem_mark, offset, path, str(exc.problem)))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if "'\\t'" in problem or "tab character" in problem:
            problem += _TAB_HINT
        issues.append(_located(name, text, mark, offset, path, f"syntax error: {problem}"))
    except yaml.reader.ReaderError as exc:
        problem = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
        line = text.count("\n", 0, exc.position)
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1)
        mark = yaml.Mark(name, exc.position, line, column, None, 0)
        issues.append(_located(name, text, mark, offset, path, f"syntax error: {problem}"))
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        issues.append(Issue(name, 1, 1 + offset, path, f"syntax error: {first}"))
    return None


# PyYAML names the tab only as a character that cannot start a token.
_TAB_HINT = "; YAML does not allow tabs for indentation: indent with spaces"


def _located(
    name: str, text: str, mark: yaml.Mark | None, offset: int, path: Path, message: str
) -> Issue:
    if mark is None:
        return Issue(name, 1, 1 + offset, path, message)
    column = mark.column + 1 + (offset if mark.line == 0 else 0)
    return Issue(name, mark.line + 1, column, path, message)


def _merge(into: RawConfig, part: RawConfig, path: Path) -> None:
    """Deep-merges `part` into `into`: mappings merge, anything else is replaced."""
    target: Any = into.data
    source: Any = part.data
    for key in path:
        target, source = target[key], source[key]
    for key, value in source.items():
        child = (*path, key)
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            into.positions.keys[child] = part.positions.key(child)
            _merge(into, part, child)
        else:
            target[key] = value
            into.positions.replace_subtree(child, part.positions)
