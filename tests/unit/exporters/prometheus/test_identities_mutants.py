"""Identity numbering in generations (identities.py), held directly (docs/dev/mutation.md):
stable numbers, forgetting only after a whole generation unseen, never reusing a number."""

from __future__ import annotations

from otelgpu.exporters.prometheus.identities import Identities


def test_an_identity_keeps_its_number_and_others_get_their_own() -> None:
    identities = Identities()
    a, b = identities.key("gpu-a"), identities.key(("alloc", "gpu-a"))
    assert a != b
    assert (identities.key("gpu-a"), identities.key(("alloc", "gpu-a"))) == (a, b)


def test_a_number_survives_one_rotation_and_is_forgotten_after_a_whole_generation() -> None:
    identities = Identities()
    a, b = identities.key("a"), identities.key("b")
    assert list(identities.rotate()) == []  # nothing was retired before
    assert identities.key("a") == a  # seen again in the next generation: same number
    assert list(identities.rotate()) == [b]  # b unseen for a whole generation
    assert identities.key("a") == a
    assert identities.key("b") not in (a, b)  # b comes back as new; no number is reused


def test_a_number_taken_back_from_the_old_generation_stays_taken() -> None:
    identities = Identities()
    a = identities.key("a")
    identities.rotate()
    assert identities.key("a") == a
    assert identities.key("a") == a
    assert list(identities.rotate()) == []  # a is current again: nothing to forget
    assert list(identities.rotate()) == [a]


def test_numbers_are_new_for_every_identity_ever_seen() -> None:
    identities = Identities()
    seen = []
    for generation in range(3):
        seen += [identities.key(("gen", generation, i)) for i in range(3)]
        identities.rotate()
    assert len(set(seen)) == len(seen)
