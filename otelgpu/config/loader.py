"""Reads pipeline files into one plain dict plus the position of every key and value.

Stage 1 of validation: YAML syntax, duplicate keys, `${env:…}` expansion on parsed scalars
(never on raw text, so a value can never inject YAML), merging several `-c` files in order and
applying `--set` overrides. Component-level checks happen in `schema.py`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

import yaml

from otelgpu.config.positions import Mark, Path, Positions
from otelgpu.errors import ConfigError, Issue

_SUBST_RE = re.compile(r"\$\$|\$\{([^}]*)\}")
_ENV_RE = re.compile(r"^env:([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$", re.DOTALL)
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class RawConfig:
    """The merged document and where each part of it came from."""

    data: dict[str, Any] = field(default_factory=dict)
    positions: Positions = field(default_factory=Positions)


def load(
    sources: list[tuple[str, str]],
    overrides: list[str] = (),  # type: ignore[assignment]
    environ: Mapping[str, str] | None = None,
) -> RawConfig:
    """Parses `(name, text)` sources in order, then `--set` overrides; raises ConfigError
    listing every problem found in any of them."""
    env = os.environ if environ is None else environ
    merged = RawConfig()
    if sources:  # errors about what is missing altogether point at the first file
        merged.positions.values[()] = Mark(sources[0][0], 1, 1)
    issues: list[Issue] = []
    for name, text in sources:
        part = _parse_document(name, text, env, issues)
        if part is not None:
            _merge(merged, part, ())
    for n, override in enumerate(overrides, start=1):
        part = _parse_override(f"--set #{n}", override, env, issues)
        if part is not None:
            _merge(merged, part, ())
    if issues:
        raise ConfigError(issues)
    return merged


def read_files(paths: list[str]) -> list[tuple[str, str]]:
    """Reads each `-c` file; a missing or unreadable file is a config error, not a crash."""
    sources, issues = [], []
    for path in paths:
        try:
            sources.append((path, FsPath(path).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            issues.append(Issue(path, 1, 1, (), f"cannot read the file: {reason}"))
    if issues:
        raise ConfigError(issues)
    return sources


def _parse_document(
    name: str, text: str, env: Mapping[str, str], issues: list[Issue]
) -> RawConfig | None:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        issues.append(Issue(name, line, col, (), f"syntax error: {problem}"))
        return None
    except yaml.YAMLError as exc:
        issues.append(Issue(name, 1, 1, (), f"syntax error: {exc}"))
        return None
    out = RawConfig()
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
    walker = _Walker(name, env, out.positions, issues)
    out.data = walker.mapping(node, ())
    return out


def _parse_override(
    name: str, override: str, env: Mapping[str, str], issues: list[Issue]
) -> RawConfig | None:
    key, sep, value = override.partition("=")
    sep_token = "::" if "::" in key else "."
    path = tuple(p for p in key.strip().split(sep_token))
    if not sep or not key.strip() or any(not p for p in path):
        issues.append(Issue(name, 1, 1, (), f'expected --set key.path=value (got "{override}")'))
        return None
    out = RawConfig()
    try:
        node = yaml.compose(value or '""', Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        issues.append(Issue(name, 1, len(key) + 2, path, f"invalid value: {exc}"))
        return None
    walker = _Walker(name, env, out.positions, issues, column_offset=len(key) + 1)
    leaf: Any = walker.node(node, path) if node is not None else None
    for part in reversed(path):
        leaf = {part: leaf}
    out.data = leaf
    mark = Mark(name, 1, 1)
    for n in range(1, len(path) + 1):
        out.positions.values.setdefault(path[:n], mark)
        out.positions.keys.setdefault(path[:n], mark)
    return out


class _Walker:
    """Turns composed YAML nodes into plain values, recording marks and expanding env."""

    def __init__(
        self,
        file: str,
        env: Mapping[str, str],
        positions: Positions,
        issues: list[Issue],
        column_offset: int = 0,
    ) -> None:
        self.file, self.env, self.positions, self.issues = file, env, positions, issues
        self.column_offset = column_offset
        self.constructor = yaml.constructor.SafeConstructor()

    def mark(self, node: yaml.Node) -> Mark:
        m = node.start_mark
        return Mark(self.file, m.line + 1, m.column + 1 + self.column_offset)

    def node(self, node: yaml.Node, path: Path) -> Any:
        self.positions.values[path] = self.mark(node)
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.node(item, (*path, i)) for i, item in enumerate(node.value)]
        value = self.constructor.construct_object(node, deep=True)
        if isinstance(value, str):
            return self.expand(value, node, path)
        return value

    def mapping(self, node: yaml.MappingNode, path: Path) -> dict[str, Any]:
        self.positions.values.setdefault(path, self.mark(node))
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG and isinstance(value_node, yaml.MappingNode):
                for k, v in self.mapping(value_node, path).items():
                    out.setdefault(k, v)
                continue
            key = self.constructor.construct_object(key_node, deep=True)
            key = "null" if key is None else str(key)
            child = (*path, key)
            if key in out:
                m = self.mark(key_node)
                self.issues.append(Issue(m.file, m.line, m.column, child, "duplicate key"))
                continue
            self.positions.keys[child] = self.mark(key_node)
            out[key] = self.node(value_node, child)
        return out

    def expand(self, text: str, node: yaml.Node, path: Path) -> str:
        """Expands `${env:NAME}`, `${env:NAME:-default}` and `$$` in one scalar."""

        def substitute(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            ref = _ENV_RE.match(match.group(1))
            if ref is None:
                self._issue(
                    node,
                    path,
                    f'unsupported substitution "{match.group(0)}": use ${{env:NAME}} '
                    "or ${env:NAME:-default} (write $$ for a literal $)",
                )
                return ""
            name, default = ref.group(1), ref.group(2)
            if name in self.env:
                return self.env[name]
            if default is not None:
                return default
            self._issue(
                node,
                path,
                f'environment variable "{name}" is not set and has no default '
                f"(use ${{env:{name}:-default}})",
            )
            return ""

        return _SUBST_RE.sub(substitute, text) if "$" in text else text

    def _issue(self, node: yaml.Node, path: Path, message: str) -> None:
        m = self.mark(node)
        self.issues.append(Issue(m.file, m.line, m.column, path, message))


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
