"""The mutation operators: which mutants a source gives, and that each is the change it names."""

from __future__ import annotations

import ast

import pytest

from scripts.mutation_runner.operators import mutate, sites


def mutants(source: str) -> dict[str, str]:
    """Every mutant of `source`: its description (with the line) to its source text."""
    out: dict[str, str] = {}
    for site in sites(ast.parse(source)):
        for choice, mutation in enumerate(site.mutations):
            key = f"{site.line}: {mutation.describe}"
            assert key not in out, f"two mutants described alike: {key}"
            out[key] = mutate(source, site.index, choice).strip()
    return out


@pytest.mark.parametrize(
    ("value", "moves"),
    [
        (64, {"64 -> 65": "65", "64 -> 63": "63", "64 -> 128": "128"}),
        (0, {"0 -> 1": "1", "0 -> -1": "-1"}),  # 0 x 2 is 0: no mutant
        (1, {"1 -> 2": "2", "1 -> 0": "0"}),  # 1 + 1 and 1 x 2 are one mutant
        (2, {"2 -> 3": "3", "2 -> 1": "1", "2 -> 4": "4"}),
    ],
)
def test_an_integer_constant_moves_up_down_and_doubles(value: int, moves: dict[str, str]) -> None:
    found = mutants(f"LIMIT = {value}")
    assert found == {"1: statement deleted": "pass"} | {
        f"1: {describe}": f"LIMIT = {new}" for describe, new in moves.items()
    }


def test_a_negative_literal_moves_its_magnitude() -> None:
    assert mutants("x = -1") == {
        "1: statement deleted": "pass",
        "1: 1 -> 2": "x = -2",
        "1: 1 -> 0": "x = -0",
    }


def test_booleans_flip_and_are_not_moved_as_integers() -> None:
    assert mutants("FLAG = True") == {
        "1: statement deleted": "pass",
        "1: True -> False": "FLAG = False",
    }


@pytest.mark.parametrize(
    ("comparison", "swapped", "other_way"),
    [
        # each boundary moves both ways: the swap one step, the shifted bound the other
        ("n < LIMIT", "n <= LIMIT", "n < LIMIT - 1"),
        ("n <= LIMIT", "n < LIMIT", "n <= LIMIT + 1"),
        ("n > LIMIT", "n >= LIMIT", "n > LIMIT + 1"),
        ("n >= LIMIT", "n > LIMIT", "n >= LIMIT - 1"),
    ],
)
def test_an_ordering_boundary_moves_both_ways(
    comparison: str, swapped: str, other_way: str
) -> None:
    op = comparison.split()[1]
    shift = other_way.split(maxsplit=2)[2].removeprefix("LIMIT ")
    found = mutants(f"ok = {comparison}")
    assert found[f"1: {op} -> {swapped.split()[1]}"] == f"ok = {swapped}"
    assert found[f"1: {op} b -> {op} b {shift}"] == f"ok = {other_way}"


@pytest.mark.parametrize("comparison", ["n < LIMIT", "n <= LIMIT", "n > LIMIT", "n >= LIMIT"])
def test_the_two_moves_of_a_boundary_are_one_step_each_side_on_integers(comparison: str) -> None:
    """On integers, the swap and the shift let in (or out) exactly the values one step on
    either side of the original boundary: one mutant leaks where the other refuses."""
    found = mutants(f"ok = {comparison}")
    moved = [text for key, text in found.items() if "->" in key and "not" not in key]
    original = {n for n in range(-5, 25) if eval(comparison, {"n": n, "LIMIT": 10})}
    changes = []
    for text in moved:
        code = compile(text, "<mutant>", "exec")
        kept: set[int] = set()
        for n in range(-5, 25):
            scope = {"n": n, "LIMIT": 10}
            exec(code, scope)
            if scope["ok"]:
                kept.add(n)
        changes.append(kept ^ original)
    assert sorted(len(c) for c in changes) == [1, 1]
    (a,), (b,) = changes
    assert abs(a - b) == 1  # the two values either side of the boundary


def test_a_chained_comparison_moves_each_ordering_boundary() -> None:
    found = mutants("ok = 0 <= n < LIMIT")
    assert found["1: <= b -> <= b + 1"] == "ok = 0 <= n + 1 < LIMIT"
    assert found["1: < b -> < b - 1"] == "ok = 0 <= n < LIMIT - 1"


@pytest.mark.parametrize("comparison", ["a < 'm'", "'m' >= a", "a == b", "a in b", "a is b"])
def test_no_boundary_shift_where_it_means_nothing(comparison: str) -> None:
    """Text compared in order has no step; equality and membership have no boundary."""
    assert not [key for key in mutants(f"ok = {comparison}") if " b " in key]


def test_the_other_mutations_are_kept() -> None:
    found = mutants("def f(a, b):\n    if a and not b:\n        return a + b\n    return None")
    assert set(found) == {
        "2: condition -> not condition",
        "2: and -> or",
        "2: not x -> x",
        "3: return value -> None",
        "3: + -> -",
    }
    assert found["2: not x -> x"].splitlines()[1] == "    if a and b:"
