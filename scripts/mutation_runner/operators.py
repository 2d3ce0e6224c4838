"""Mutation operators: where a module can be changed, and the change at each place.

`sites(tree)` walks a module's AST in a fixed order and lists every `Site` (a node and the
mutations that apply to it). `mutate(source, site_index, choice)` parses the source again,
walks it in the same order and applies one mutation, returning the mutated source text.
Docstrings, annotations, decorators and `__all__` are not mutated: changing them changes no
behaviour.

A threshold can be wrong in two directions: one refuses (or waits, or keeps) more than it
should, the other lets through more. Integer constants therefore move by +1, -1 and x2, and
an ordering comparison's boundary moves one step each way (`<` -> `<=` and `a < b - 1`, ...).
`VERSION` names this operator set: a recorded run says which set made its mutants.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

VERSION = 2  # bump when the mutants of the same source change

# Comparison swaps: each operator to the one a slip of the keyboard (or of thought) gives.
_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINARY: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
}
_SYMBOL = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.BitOr: "|", ast.BitAnd: "&", ast.And: "and", ast.Or: "or",
}  # fmt: skip


@dataclass(frozen=True)
class Mutation:
    """One change at a site: a description for the report, and the function that makes it
    (it edits the node in place, or returns a replacement node)."""

    describe: str
    apply: Callable[[ast.AST], ast.AST | None]


@dataclass(frozen=True)
class Site:
    """A place in the module (its position) and the mutations possible there."""

    index: int
    line: int
    col: int
    mutations: tuple[Mutation, ...]


def _swap_op(
    attr: str, table: dict[type, type], position: int | None = None
) -> Callable[[ast.AST], None]:
    def apply(node: ast.AST) -> None:
        if position is None:
            old = getattr(node, attr)
            setattr(node, attr, table[type(old)]())
        else:
            ops = getattr(node, attr)
            ops[position] = table[type(ops[position])]()

    return apply


def _replace_with(make: Callable[[ast.AST], ast.AST]) -> Callable[[ast.AST], ast.AST]:
    return lambda node: ast.copy_location(make(node), node)


def _constant_mutations(node: ast.Constant) -> list[Mutation]:
    value = node.value
    if isinstance(value, bool):
        flipped = not value
        return [Mutation(f"{value} -> {flipped}", _replace_with(lambda _: ast.Constant(flipped)))]
    if isinstance(value, int):
        return [
            Mutation(f"{value} -> {new}", _replace_with(_constant(new)))
            for new in _integer_moves(value)
        ]
    if isinstance(value, float):
        new_f = 0.0 if value else 1.0
        return [Mutation(f"{value} -> {new_f}", _replace_with(lambda _: ast.Constant(new_f)))]
    if isinstance(value, str):
        if value:
            shown = value if len(value) <= 30 else value[:27] + "..."
            return [Mutation(f"{shown!r} -> ''", _replace_with(lambda _: ast.Constant("")))]
        return [Mutation("'' -> 'XX'", _replace_with(lambda _: ast.Constant("XX")))]
    return []


def _constant(value: int) -> Callable[[ast.AST], ast.AST]:
    return lambda _: ast.Constant(value)


def _integer_moves(value: int) -> list[int]:
    """`value` + 1, - 1 and x 2, each once and none equal to `value` (0 gives 1 and -1; 1
    gives 2 and 0): a bound off by one either way, or far off."""
    moves: list[int] = []
    for new in (value + 1, value - 1, value * 2):
        if new != value and new not in moves:
            moves.append(new)
    return moves


# The ordering comparisons, and which way `<`/`<=` (or `>`/`>=`) already moves the boundary:
# the swap moves it one way, a shift of the right-hand side by one the other way.
_SHIFT_OTHER_WAY: dict[type[ast.cmpop], int] = {ast.Lt: -1, ast.LtE: +1, ast.Gt: +1, ast.GtE: -1}


def _shift_comparator(position: int, step: int) -> Callable[[ast.AST], None]:
    def apply(node: ast.AST) -> None:
        comparators = node.comparators  # type: ignore[attr-defined]
        op = ast.Add() if step > 0 else ast.Sub()
        comparators[position] = ast.BinOp(comparators[position], op, ast.Constant(abs(step)))

    return apply


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)


def _boundary_moves(node: ast.Compare) -> list[Mutation]:
    """For each ordering comparison (not of string constants), its boundary moved the way the
    `<`/`<=` swap does not: `a < b` -> `a < b - 1`, `a <= b` -> `a <= b + 1`, `a > b` ->
    `a > b + 1`, `a >= b` -> `a >= b - 1`."""
    out: list[Mutation] = []
    operands = [node.left, *node.comparators]
    for i, op in enumerate(node.ops):
        step = _SHIFT_OTHER_WAY.get(type(op))
        if step is None or _is_text(operands[i]) or _is_text(operands[i + 1]):
            continue
        symbol = _SYMBOL[type(op)]
        shifted = f"b + {step}" if step > 0 else f"b - {-step}"
        out.append(Mutation(f"{symbol} b -> {symbol} {shifted}", _shift_comparator(i, step)))
    return out


def _node_mutations(node: ast.AST) -> list[Mutation]:
    """Every mutation of `node` itself (not of its children)."""
    out: list[Mutation] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                swapped = _SYMBOL[_COMPARE[type(op)]]
                out.append(
                    Mutation(f"{_SYMBOL[type(op)]} -> {swapped}", _swap_op("ops", _COMPARE, i))
                )
        out.extend(_boundary_moves(node))
    elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _BINARY:
        new = _BINARY[type(node.op)]
        out.append(Mutation(f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new]}", _swap_op("op", _BINARY)))
    elif isinstance(node, ast.BoolOp):
        new_op = ast.Or if isinstance(node.op, ast.And) else ast.And
        out.append(
            Mutation(
                f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new_op]}",
                lambda n: setattr(n, "op", new_op()),
            )
        )
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(Mutation("not x -> x", lambda n: n.operand))  # type: ignore[attr-defined]
    elif isinstance(node, ast.Constant):
        out.extend(_constant_mutations(node))
    elif isinstance(node, ast.Return) and not _returns_none(node):
        out.append(Mutation("return value -> None", lambda n: setattr(n, "value", None)))
    if isinstance(node, ast.If | ast.While):
        out.append(Mutation("condition -> not condition", _negate_test))
    if _deletable(node):
        out.append(Mutation("statement deleted", _replace_with(lambda _: ast.Pass())))
    return out


def _returns_none(node: ast.Return) -> bool:
    return node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)


def _negate_test(node: ast.AST) -> None:
    node.test = ast.UnaryOp(ast.Not(), node.test)  # type: ignore[attr-defined]


def _deletable(node: ast.AST) -> bool:
    """Calls made for their effect, and assignments (not docstrings, not `...`)."""
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Call | ast.Await)
    return isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and (
        not isinstance(node, ast.AnnAssign) or node.value is not None
    )


def _children(node: ast.AST) -> Iterator[ast.AST]:
    """The children worth mutating: no docstrings, annotations, decorators, f-string format
    specs or `__all__`."""
    skip: set[int] = set()
    body = getattr(node, "body", None)
    if (
        isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        skip.add(id(body[0]))
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        skip.update(id(d) for d in node.decorator_list)
        if node.returns is not None:
            skip.add(id(node.returns))
    if isinstance(node, ast.ClassDef):
        skip.update(id(d) for d in node.decorator_list)
    if isinstance(node, ast.arg) and node.annotation is not None:
        skip.add(id(node.annotation))
    if isinstance(node, ast.AnnAssign):
        skip.add(id(node.annotation))
    if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
        skip.add(id(node.format_spec))
    if isinstance(node, ast.ImportFrom | ast.Import) or _is_type_expression(node):
        return
    for child in ast.iter_child_nodes(node):
        if id(child) not in skip and not _is_export_list(child):
            yield child


_TYPE_NAMES = frozenset({"Literal", "tuple", "dict", "list", "set", "frozenset", "Callable"})


def _is_type_expression(node: ast.AST) -> bool:
    """`Literal["a", "b"]`, `tuple[str, ...]`: type aliases, no behaviour to change."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in _TYPE_NAMES
    )


def _is_export_list(node: ast.AST) -> bool:
    """`__all__ = [...]`: names for `import *`, which nothing here uses; no behaviour."""
    return isinstance(node, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
    )


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """Depth-first, in source order, skipping what `_children` skips."""
    yield node
    for child in _children(node):
        yield from _walk(child)


def sites(tree: ast.AST) -> list[Site]:
    """Every mutable place of a parsed module, in a fixed order."""
    out: list[Site] = []
    for index, node in enumerate(_walk(tree)):
        mutations = _node_mutations(node)
        if mutations:
            line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
            out.append(Site(index, line, col, tuple(mutations)))
    return out


def mutate(source: str, site_index: int, choice: int) -> str:
    """`source` with mutation `choice` of the node at walk position `site_index` applied."""
    tree = ast.parse(source)
    parents: dict[int, tuple[ast.AST, str, int | None]] = {}
    for parent in _walk(tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for n, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        parents[id(item)] = (parent, field, n)
            elif isinstance(value, ast.AST):
                parents[id(value)] = (parent, field, None)
    for index, node in enumerate(_walk(tree)):
        if index != site_index:
            continue
        replacement = _node_mutations(node)[choice].apply(node)
        if replacement is not None and replacement is not node:
            parent, name, position = parents[id(node)]
            if position is None:
                setattr(parent, name, replacement)
            else:
                getattr(parent, name)[position] = replacement
        return ast.unparse(ast.fix_missing_locations(tree))
    raise IndexError(f"no node at walk position {site_index}")
