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


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("password=hunter2xyz", "cGFzc3dvcm\nQ9aHVudGVy\nMnh5eg=="),
        ("postgres://app:hunter2@db/x", "cG9zdGdyZXM6 Ly9hcHA6aHVu dGVyMkBkYi94"),
    ],
)
def test_base64_wrapped_in_short_lines_is_joined_and_read(text: str, encoded: str) -> None:
    # each line is under the 16 characters a base64 run needs: only the join shows the pair
    assert "".join(encoded.split()) == b64(text)
    assert credential_kind(encoded) in ("credential_pair", "credential_url")


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
