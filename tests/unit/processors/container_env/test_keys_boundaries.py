"""The selector's bounds, exactly: the span a value is checked on, the length cap, which
include entries name a key, and `refusal`'s fail-closed default. Each is held on both sides,
so a bound moved either way (letting more out, or refusing what it should keep) fails."""

from __future__ import annotations

import pytest

from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.keys import KeySelector, refusal

MAX_LEN = 8
# keys.CHECK_MARGIN by its value, not imported: a test reading the constant moves with it.
CHECK_MARGIN = 1024
URL_HEAD = "https://app:hunter2@"  # a URL's user info: refused once the `@` is seen


def _selector(include: list[str]) -> KeySelector:
    return KeySelector(
        "env", KeyFilter(include=include), allow_secret_like_keys=False, max_value_length=MAX_LEN
    )


def _value_whose_url_info_ends_at(position: int) -> str:
    """Plain words, then a URL whose user info's `@` is character number `position` (1-based),
    then a host."""
    filler = ("plain words " * 200)[: position - len(URL_HEAD)]
    value = filler + URL_HEAD + "db.example.com/x"
    assert value.index("@") == position - 1
    return value


def test_a_credential_seen_at_the_last_checked_character_is_refused() -> None:
    # The check spans max_value_length + CHECK_MARGIN characters: a credential whose shape
    # completes on the last of them is seen, one character less and it would be exported.
    value = _value_whose_url_info_ends_at(MAX_LEN + CHECK_MARGIN)
    got = _selector(["NOTE"]).select([("NOTE", value)])
    assert got.values == {}
    assert [key.reason for key in got.refused] == ["credential_url"]  # type: ignore[attr-defined]


def test_a_credential_past_the_checked_span_is_not_looked_for() -> None:
    # One character further it is beyond the span (and beyond what is exported): the value
    # is kept, cut to the cap. The span is a bound on the work per value, and exact.
    value = _value_whose_url_info_ends_at(MAX_LEN + CHECK_MARGIN + 1)
    got = _selector(["NOTE"]).select([("NOTE", value)])
    assert got.values == {"NOTE": value[:MAX_LEN]} and got.refused == []
    assert got.truncated == 1


def test_a_value_one_character_over_the_cap_is_cut_and_counted() -> None:
    got = _selector(["A", "B"]).select([("A", "x" * (MAX_LEN + 1)), ("B", "y" * MAX_LEN)])
    assert got.values == {"A": "x" * MAX_LEN, "B": "y" * MAX_LEN}
    assert got.truncated == 1


@pytest.mark.parametrize("pattern", ["TEAM_*", "TEAM_?", "TEAM_[AB]"])
def test_a_key_spelled_like_a_glob_is_not_named_by_it(pattern: str) -> None:
    # An include entry with a wildcard names no key, even the key spelled exactly like it:
    # its value is held to the plain-value rule as for any key a glob matched.
    random_value = "Xk9mQ2pL7vRt"  # 12 characters: too short for high_entropy, not plain
    got = _selector([pattern]).select([(pattern, random_value)])
    assert got.values == {}
    assert [key.reason for key in got.refused] == ["glob_random_value"]  # type: ignore[attr-defined]
    # named exactly, the same value is the operator's word: kept (cut to the cap)
    assert _selector(["TEAM_X"]).select([("TEAM_X", random_value)]).refused == []


def test_refusal_refuses_secret_like_keys_unless_told_otherwise() -> None:
    assert refusal("DB_PASSWORD", "plain") == "secret_key"
    assert refusal("DB_PASSWORD", "plain", allow_secret_like_keys=True) is None
