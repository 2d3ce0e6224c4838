"""Composed YAML nodes → plain values, with the position of every key and value.

Only plain YAML is read: strings, numbers, booleans, null, timestamps, lists and mappings, plus
merge keys (`<<: *defaults`, `<<: [*a, *b]`). Any other tag, a bad value under an explicit tag,
a recursive alias or an alias expansion past the budget becomes a located issue, never an
exception: this runs on every SIGHUP, with files the agent did not write.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import yaml

from otelgpu.component.errors import Issue
from otelgpu.config.bounded_read import TooLarge, Unreadable, read_bounded
from otelgpu.config.composer import MAX_DEPTH, Alias, Composed
from otelgpu.config.positions import Mark, Path, Positions

_SUBST_RE = re.compile(r"\$\$|\$\{([^}]*)\}")
# `${env:NAME}`, and `${NAME}`: the Collector's default scheme is env.
_ENV_RE = re.compile(r"^(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$", re.DOTALL)
_FILE_RE = re.compile(r"^file:(.+)$", re.DOTALL)
_SUBST_HELP = (
    "use ${env:NAME}, ${NAME}, ${env:NAME:-default} or ${file:/path} (write $$ for a literal $)"
)
_YAML = "tag:yaml.org,2002:"
_MERGE, _VALUE = _YAML + "merge", _YAML + "value"
_SCALAR_TAGS = {_YAML + t for t in ("null", "bool", "int", "float", "str", "timestamp")}
_MAP, _SEQ = _YAML + "map", _YAML + "seq"
_UNSUPPORTED = "only plain strings, numbers, booleans, null, lists and mappings are read"
_SPECIAL = {
    _MERGE: '"<<" is YAML\'s merge key, which only works as a key: quote it ("<<") to use it '
    "as text",
    _VALUE: '"=" is YAML 1.1\'s value key, which is not supported: quote it ("=") to use it '
    "as text",
}
_MERGE_VALUE = (
    "the merge key << takes a mapping or a list of mappings, such as *defaults or [*a, *b]"
)

# What all alias uses in one document may expand to, together. Real files use a few dozen
# aliases; a "billion laughs" file of a few hundred bytes stands for ~10**9 values.
MAX_ALIAS_USES = 10_000
MAX_ALIAS_VALUES = 100_000
MAX_ALIAS_TEXT = 10 * 2**20  # characters of scalar text
# A `${file:...}` holds a token, a password or a PEM bundle: anything larger is a wrong path.
MAX_FILE_SUBSTITUTION = 2**20


class _Refused(Exception):
    """The alias budget ran out: stop walking this document (its issue is already recorded)."""


class Walker:
    """Walks one composed document (or `--set` value) into plain values and positions."""

    def __init__(
        self,
        file: str,
        composed: Composed,
        env: Mapping[str, str],
        positions: Positions,
        issues: list[Issue],
        column_offset: int = 0,
        damaged: set[Path] | None = None,
    ) -> None:
        self.file, self.env, self.positions, self.issues = file, env, positions, issues
        # Paths whose value an issue replaced (None, or "" for a failed substitution): what
        # validation later says about such a value is an echo of that issue.
        self.damaged: set[Path] = set() if damaged is None else damaged
        self.aliases, self.tagged = composed.aliases, composed.tagged
        self.column_offset = column_offset
        self.constructor = yaml.constructor.SafeConstructor()
        self.open: set[int] = set()  # collections being walked (recursive alias detection)
        self.expanding: list[Alias] = []  # the alias uses being expanded, outermost first
        # where the outermost alias use of the expansion in progress (or the last) is
        self.outermost: tuple[yaml.Node, Path] | None = None
        self.uses = self.values = self.text = 0

    def walk(self, node: yaml.Node, path: Path) -> Any:
        """The plain value of `node`; None after an issue (recorded in `issues`)."""
        try:
            return self.node(node, path)
        except _Refused:
            return None

    def mark(self, node: yaml.Node) -> Mark:
        m = node.start_mark
        column = m.column + 1 + (self.column_offset if m.line == 0 else 0)
        return Mark(self.file, m.line + 1, column)

    def node(self, node: yaml.Node, path: Path) -> Any:
        self.positions.values[path] = self.mark(node)
        with self._entered(node, path) as target:
            if target is None:
                return None
            if len(path) > MAX_DEPTH:
                self._issue(node, path, f"nesting deeper than {MAX_DEPTH} levels")
                return None
            if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
                return self.mapping(node, path)
            if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
                return [self.node(item, (*path, i)) for i, item in enumerate(node.value)]
            if not isinstance(node, yaml.ScalarNode):
                self._unsupported(node, path)
                return None
            value = self.scalar(node, path)
            return self.expand(value, node, path) if isinstance(value, str) else value

    def scalar(self, node: yaml.Node, path: Path) -> Any:
        """The value of a scalar under its tag; an issue (and None) when the tag or value is bad."""
        if node.tag in _SPECIAL:
            self._issue(node, path, _SPECIAL[node.tag])
            return None
        if node.tag not in _SCALAR_TAGS:
            self._unsupported(node, path)
            return None
        try:
            return self.constructor.construct_object(node)
        except Exception:  # PyYAML's constructors fail on bad text in many ways (KeyError, ...)
            if id(node) not in self.tagged:
                return str(node.value)  # plain `2020-99-99` only looked like a date: text
            text = _quote(str(node.value))
            self._issue(node, path, f"invalid {_short(node.tag)} value {text}")
            return None

    def mapping(self, node: yaml.MappingNode, path: Path) -> dict[str, Any]:
        self.positions.values.setdefault(path, self.mark(node))
        own, self.positions = self.positions, Positions()  # merged keys are walked aside
        merged: dict[str, Any] = {}
        try:
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE:
                    self._merge(merged, value_node, path, in_list=False)
        finally:
            aside, self.positions = self.positions, own
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                continue
            key = self.key(key_node, path)
            if key is None:
                continue
            child = (*path, key)
            if key in out:
                self._issue(key_node, child, "duplicate key", damaged=False)
                continue
            self.positions.keys[child] = self.mark(key_node)
            out[key] = self.node(value_node, child)
        kept = {k: v for k, v in merged.items() if k not in out}  # written keys win
        _copy_under(aside, self.positions, path, kept)
        return {**kept, **out}

    def key(self, node: yaml.Node, path: Path) -> str | None:
        """A mapping key as text; keys must be scalars (a name)."""
        if not isinstance(node, yaml.ScalarNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"
            self._issue(node, path, f"a key must be a name, not {kind}")
            return None
        with self._entered(node, path) as target:
            if target is None:
                return None
            before = len(self.issues)
            key = self.scalar(node, path)
            if len(self.issues) > before:
                return None
            return "null" if key is None else str(key)

    def _merge(self, into: dict[str, Any], node: yaml.Node, path: Path, *, in_list: bool) -> None:
        """Merges the mapping(s) a `<<` names into `into`; earlier sources win."""
        with self._entered(node, path) as target:
            if target is None:
                return
            if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
                self._merge_mapping(into, node, path)
            elif isinstance(node, yaml.SequenceNode) and not in_list:
                for item in node.value:
                    self._merge(into, item, path, in_list=True)
            else:
                self._issue(node, path, _MERGE_VALUE)

    def _merge_mapping(self, into: dict[str, Any], node: yaml.MappingNode, path: Path) -> None:
        """Adds the keys `into` lacks, with their positions (walked aside, so a losing
        source's positions never replace a winning one's)."""
        own, self.positions = self.positions, Positions()
        try:
            values = self.mapping(node, path)
        finally:
            scratch, self.positions = self.positions, own
        added = {k: v for k, v in values.items() if k not in into}
        into.update(added)
        _copy_under(scratch, self.positions, path, added)

    @contextmanager
    def _entered(self, node: yaml.Node, path: Path) -> Iterator[yaml.Node | None]:
        """Charges `node` to the alias budget; yields None for a recursive alias."""
        alias = self.aliases.get(id(node))
        target = alias.target if alias else node
        if alias is not None and id(target) in self.open:
            self._issue(node, path, f"alias *{alias.name} refers to a node that contains it")
            yield None
            return
        if alias is not None:
            self._charge_use(alias, node, path)
        elif self.expanding:
            self._charge_value(node)
        collection = not isinstance(target, yaml.ScalarNode)
        if collection:
            self.open.add(id(target))
        try:
            yield target
        finally:
            if collection:
                self.open.discard(id(target))
            if alias is not None:
                self.expanding.pop()

    def _charge_use(self, alias: Alias, node: yaml.Node, path: Path) -> None:
        if not self.expanding:
            self.outermost = (node, path)
        self.expanding.append(alias)
        self.uses += 1
        if self.uses > MAX_ALIAS_USES:
            self._refuse(f"{MAX_ALIAS_USES} alias uses")
        self._charge_value(node)

    def _charge_value(self, node: yaml.Node) -> None:
        self.values += 1
        if isinstance(node, yaml.ScalarNode):
            self.text += len(node.value)
        if self.values > MAX_ALIAS_VALUES:
            self._refuse(f"{MAX_ALIAS_VALUES} values")
        if self.text > MAX_ALIAS_TEXT:
            self._refuse(f"{MAX_ALIAS_TEXT // 2**20} MiB of text")

    def _refuse(self, limit: str) -> None:
        assert self.outermost is not None
        node, path = self.outermost
        name = self.expanding[0].name
        message = f"alias *{name} expands beyond the limit of {limit} (an alias bomb?)"
        self._issue(node, path, message)
        raise _Refused

    def expand(self, text: str, node: yaml.Node, path: Path) -> str:
        """Expands `${env:NAME}`, `${NAME}`, `${env:NAME:-default}`, `${file:PATH}` and `$$`
        in one scalar. What a substitution returns is never expanded again."""

        def substitute(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            ref = match.group(1)
            if (env := _ENV_RE.match(ref)) is not None:
                return self._env(env.group(1), env.group(2), node, path)
            if (file := _FILE_RE.match(ref)) is not None:
                return self._file(file.group(1), node, path)
            self._issue(node, path, f'unsupported substitution "{match.group(0)}": {_SUBST_HELP}')
            return ""

        return _SUBST_RE.sub(substitute, text) if "$" in text else text

    def _env(self, name: str, default: str | None, node: yaml.Node, path: Path) -> str:
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

    def _file(self, name: str, node: yaml.Node, path: Path) -> str:
        """A secret from a mounted file: its text, trailing line breaks removed (the Collector
        parses the file as YAML, which drops them too; inner lines are kept, so a PEM works).
        Only a regular file is read, within a size and a time bound (`bounded_read`)."""
        try:
            data = read_bounded(name, MAX_FILE_SUBSTITUTION)
        except TooLarge:
            limit = MAX_FILE_SUBSTITUTION // 2**10
            self._issue(node, path, f'"${{file:{name}}}" is larger than {limit} KiB')
            return ""
        except Unreadable as exc:
            self._issue(node, path, f'cannot read "${{file:{name}}}": {exc}')
            return ""
        try:
            return data.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            self._issue(node, path, f'"${{file:{name}}}" is not UTF-8 text')
            return ""

    def _unsupported(self, node: yaml.Node, path: Path) -> None:
        self._issue(node, path, f"unsupported tag {_short(node.tag)}: {_UNSUPPORTED}")

    def _issue(self, node: yaml.Node, path: Path, message: str, *, damaged: bool = True) -> None:
        if damaged:
            self.damaged.add(path)
        m = self.mark(node)
        self.issues.append(Issue(m.file, m.line, m.column, path, message))


def _copy_under(source: Positions, target: Positions, path: Path, keys: Mapping[str, Any]) -> None:
    """Copies `source`'s marks at and under `path + (key,)` for each of `keys` (one pass)."""
    n = len(path)
    for theirs, ours in ((source.values, target.values), (source.keys, target.keys)):
        for p, mark in theirs.items():
            if len(p) > n and p[n] in keys:
                ours[p] = mark


def _short(tag: str) -> str:
    text = "!!" + tag.removeprefix(_YAML) if tag.startswith(_YAML) else tag
    return text if len(text) <= 60 else text[:57] + "..."


def _quote(text: str) -> str:
    """A value for a one-line message: control characters escaped, long text cut."""
    cut = text if len(text) <= 60 else text[:57] + "..."
    return '"' + cut.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
