"""YAML text → node graph, with nesting bounded and every alias use kept apart from its anchor.

PyYAML's composer hands back the anchored node itself for `*name`, so a graph built from a few
hundred bytes can stand for gigabytes once walked, and nothing says where an alias was used.
Here each alias use becomes a shallow copy of its anchor's node carrying the alias's own
position, listed in `Composed.aliases`; the walker charges every expansion to a budget (see
`walker.py`). Nesting is bounded while composing, because PyYAML composes recursively.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.events import AliasEvent, ScalarEvent

MAX_DEPTH = 100  # levels of nested lists/mappings; real pipeline files use fewer than 15


class NestingTooDeep(yaml.MarkedYAMLError):
    """A document nests lists/mappings deeper than MAX_DEPTH."""


@dataclass(frozen=True)
class Alias:
    """One use of `*name`: the anchored node it stands for."""

    name: str
    target: yaml.Node


@dataclass
class Composed:
    """The root node (None for an empty document) and the alias uses inside it, by node id."""

    root: yaml.Node | None
    aliases: dict[int, Alias] = field(default_factory=dict)
    tagged: set[int] = field(default_factory=set)  # scalars whose tag was written (`!!int 1`)


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0
        self.alias_uses: dict[int, Alias] = {}
        self.tagged: set[int] = set()

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent):
            target = super().compose_node(parent, index)
            return self._use(target, event) if target is not None else None
        if self.depth >= MAX_DEPTH:
            raise NestingTooDeep(
                problem=f"nesting deeper than {MAX_DEPTH} levels", problem_mark=event.start_mark
            )
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if isinstance(event, ScalarEvent) and event.tag not in (None, "!"):
            self.tagged.add(id(node))
        return node

    def _use(self, target: yaml.Node, event: AliasEvent) -> yaml.Node:
        node = copy.copy(target)  # shares `value` with the anchor: nothing is expanded here
        node.start_mark, node.end_mark = event.start_mark, event.end_mark
        self.alias_uses[id(node)] = Alias(str(event.anchor), target)
        if id(target) in self.tagged:
            self.tagged.add(id(node))
        return node


def compose(text: str) -> Composed:
    """Composes one YAML document; raises yaml.YAMLError (NestingTooDeep when too deep)."""
    loader = _BoundedLoader(text)
    try:
        root = loader.get_single_node()
        return Composed(root, loader.alias_uses, loader.tagged)
    finally:
        loader.dispose()
