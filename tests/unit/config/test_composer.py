"""The composer's bookkeeping, checked directly: nesting bound at its edge, alias uses kept
apart, explicit tags remembered."""

from __future__ import annotations

import pytest
import yaml

from otelgpu.config.composer import MAX_DEPTH, NestingTooDeep, compose


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_nesting_up_to_the_bound_composes_and_one_more_level_does_not() -> None:
    assert compose(_nested(MAX_DEPTH)).root is not None
    with pytest.raises(NestingTooDeep, match=f"nesting deeper than {MAX_DEPTH} levels"):
        compose(_nested(MAX_DEPTH + 1))


def test_the_bound_is_on_depth_not_on_how_many_collections() -> None:
    wide = "\n".join(f"k{i}: {{a: [1, {{b: 2}}]}}" for i in range(3 * MAX_DEPTH))
    assert len(compose(wide).root.value) == 3 * MAX_DEPTH  # type: ignore[union-attr]


def test_an_empty_document_has_no_root() -> None:
    assert compose("").root is None
    assert compose("# only a comment\n").aliases == {}


def test_each_alias_use_is_its_own_node_at_its_own_position() -> None:
    composed = compose("a: &base {x: 1}\nb: *base\nc: *base\n")
    assert composed.root is not None
    (_, anchor), (_, first), (_, second) = composed.root.value
    assert first is not anchor and second is not first
    assert first.value is anchor.value  # a shallow copy: nothing expanded
    assert (first.start_mark.line, second.start_mark.line) == (1, 2)
    assert set(composed.aliases) == {id(first), id(second)}
    assert composed.aliases[id(first)].name == "base"
    assert composed.aliases[id(first)].target is anchor
    assert id(anchor) not in composed.aliases


def test_scalars_with_a_written_tag_are_remembered_and_so_are_their_aliases() -> None:
    composed = compose("a: &n !!int 1\nb: 2\nc: ! 3\nd: *n\ne: !!str x\n")
    assert composed.root is not None
    nodes = {key.value: value for key, value in composed.root.value}
    assert {k for k, node in nodes.items() if id(node) in composed.tagged} == {"a", "d", "e"}


def test_a_syntax_error_is_a_yaml_error() -> None:
    with pytest.raises(yaml.YAMLError):
        compose("a: [1, 2\n")
