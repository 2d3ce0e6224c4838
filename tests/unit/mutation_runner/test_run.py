"""The runner's naming and sampling of mutants: names are what records and reruns go by."""

from __future__ import annotations

from collections import Counter

from scripts.mutation_runner.run import all_mutants, sample


def test_every_mutant_has_a_name_of_its_own() -> None:
    # `a + b + c`: the outer and the inner `+` start at the same column
    mutants = all_mutants("total = a * 2 + b * 2 + c\n")
    names = [m.name for m in mutants]
    assert len(set(names)) == len(names)
    assert "1:8: + -> -" in names and "1:8: + -> - (#2)" in names
    assert Counter(m.describe.split(" (#")[0] for m in mutants)["2 -> 3"] == 2


def test_a_sample_is_the_same_for_the_same_seed_and_in_source_order() -> None:
    mutants = all_mutants("x = 1\ny = 2\nz = x + y\nw = z * 3\n")
    first, again = sample(mutants, 5, 14), sample(mutants, 5, 14)
    assert first == again and len(first) == 5
    assert first == sorted(first, key=mutants.index)
    assert sample(mutants, None, 14) == mutants
