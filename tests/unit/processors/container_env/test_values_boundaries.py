"""The value rules' bounds, each held on both sides at its documented value.

A bound moved one way lets a credential out; moved the other, it refuses (or decodes) more
than the module doc says. The bounds are written here as numbers, not imported: a test that
reads `values.MAX_LAYERS` moves with a mutant of it and cannot tell the two apart.
"""

from __future__ import annotations

import base64
import gzip

import pytest

from otelgpu.processors.container_env.values import credential_kind, plain_refusal

PAIR = "password=hunter2x"
MAX_LAYERS = 4  # encoding steps the decoding follows
MAX_READINGS = 64  # readings of one value in all
MAX_INFLATED = 4096  # bytes out of one decompression


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def test_a_pair_four_encodings_deep_is_found_and_five_is_past_the_bound() -> None:
    text = PAIR
    for _ in range(MAX_LAYERS):
        text = b64(text)
    assert credential_kind(text) == "credential_pair"
    # one layer more is beyond the bound: decoding stops a step short of the pair
    assert credential_kind(b64(text)) != "credential_pair"


def _runs_then_encoded_pair(harmless: int) -> str:
    """`harmless` base64 runs of plain text, then a run whose text is base64 of a pair (found
    only by decoding that reading once more), joined by commas (no run is wrapped)."""
    runs = [b64(f"harmless text {n:03}") for n in range(harmless)]
    return ",".join([*runs, b64(b64(PAIR))])


def test_a_reading_is_decoded_while_fewer_than_sixty_four_were_read() -> None:
    # The value is reading 1 and the n-th run's text reading n + 1: with 61 runs before it,
    # the pair's run is reading 63, decoded, and its text (the pair) reading 64.
    assert credential_kind(_runs_then_encoded_pair(MAX_READINGS - 3)) == "credential_pair"


def test_the_sixty_fourth_reading_is_looked_at_but_not_decoded() -> None:
    # One run more and the pair's run is reading 64: looked at, not decoded (the pair stays
    # hidden; the entropy rule still refuses the long base64 runs)
    assert credential_kind(_runs_then_encoded_pair(MAX_READINGS - 2)) == "high_entropy"


def _gzipped_url_whose_at_sign_is_byte(position: int) -> str:
    url = "https://app:hunter2@"
    filler = ("plain words " * 400)[: position - len(url)]
    raw = (filler + url + "db.example.com/").encode()
    assert raw.index(b"@") == position - 1
    return b64(gzip.compress(raw, mtime=0))


def test_a_shape_completed_by_the_last_inflated_byte_is_found() -> None:
    assert credential_kind(_gzipped_url_whose_at_sign_is_byte(MAX_INFLATED)) == "credential_url"


def test_what_inflates_past_the_bound_is_not_read() -> None:
    found = credential_kind(_gzipped_url_whose_at_sign_is_byte(MAX_INFLATED + 1))
    assert found != "credential_url"


def test_a_random_run_needs_an_alphanumeric_stretch_of_twelve() -> None:
    # the same random characters, cut by base64's `-` into stretches of 12 and 11, then of
    # 11, 11 and 4: the first holds a stretch long enough to be a token's, the second not
    assert credential_kind("q8Zr2LmX7vT1-kP4nW9sB3yH") == "high_entropy"
    assert credential_kind("q8Zr2LmX7vT-1kP4nW9sB3y-H6aD") is None


def test_the_plain_rule_looks_at_stretches_of_twelve_or_more() -> None:
    assert plain_refusal("Xk9mQ2pL7vRt") == "glob_random_value"
    assert plain_refusal("Xk9mQ2pL7vR") is None  # 11: too short to tell from a name


@pytest.mark.parametrize("value", ["gpu0gpu1gpu2gpu3", "a1b2a1b2a1b2", "rank0rank1rank2"])
def test_a_repetitive_stretch_is_below_the_plain_entropy_bar(value: str) -> None:
    # Letters and digits switching often, but from a handful of symbols: below
    # 0.75 x log2(min(length, alphabet)) bits per character, so not random.
    assert plain_refusal(value) is None


# A run of 32 characters, one of them 4 times, eight twice and twelve once: 4.25 bits per
# character, exactly the bar 0.85 x log2(32) (both exact in binary floating point).
AT_THE_BAR = "Xb7KdX3MpRXQ9wT2zXb7Kd3MpRY5nV8s"
# 64 characters, 29 of them twice and 6 once: 5.09375 bits per character, under the bar
# 0.85 x log2(64) = 5.1 of a run of 64 or more.
UNDER_THE_LONG_BAR = "Aa0Bb1Cc2Dd3Ea4Fb5Gc6Hd7Jm8Kn9Lp0M1N2P3Q4A5B6C7D8E9FGHJKLMNPQRST"


def test_a_run_whose_entropy_equals_the_bar_is_random() -> None:
    assert len(AT_THE_BAR) == 32
    assert credential_kind(AT_THE_BAR) == "high_entropy"


def test_a_run_of_sixty_four_is_held_to_the_bar_of_sixty_four_symbols() -> None:
    # the bar stops growing at 64 characters (the base64 alphabet): a long run just under
    # it is no random run (as 0.85 x log2(63) would have it)
    assert len(UNDER_THE_LONG_BAR) == 64
    assert credential_kind(UNDER_THE_LONG_BAR) is None


@pytest.mark.parametrize(
    ("segment", "refused"),
    [
        # hex: the alphabet is 16, the bar 0.75 x 4 = 3 bits
        ("0a1b2c3d0a1b2c3d0a1b2c3d0a1b2c3d", True),  # 32, eight digits 4 times: 3.0 bits
        ("0a0a0b1b1c2c2d33", False),  # 16: 2.95 bits, under 3
        # upper case and digits, or lower case and digits: 36 symbols, 3.877 bits for 40
        ("0G1H2J3K4M5N0G1H2J3K4M5N0G1H2J3K4M5N6P7Q", True),  # 3.896 bits
        ("0G1H2J3K4M5G0H1J2K3M4G5H0J1K2M3N4P5Q7NPQ", False),  # 3.864 bits
        ("0g1h2j3k4m5n0g1h2j3k4m5n0g1h2j3k4m5n6p7q", True),
        ("0g1h2j3k4m5g0h1j2k3m4g5h0j1k2m3n4p5q7npq", False),
    ],
)
def test_the_plain_entropy_bar_is_of_the_alphabet_the_stretch_uses(
    segment: str, refused: bool
) -> None:
    # 0.75 x log2(min(length, alphabet)): each alphabet's bar, held just above and below
    assert plain_refusal(segment) == ("glob_random_value" if refused else None)


def test_a_stretch_that_is_sixty_percent_words_is_not_random() -> None:
    # `Model`, `Data` and `Run` cover 12 of 20 characters, and it switches between letters
    # and digits once: a name, however many other letters it has
    assert plain_refusal("ModelDataRunXQZK7942") is None
