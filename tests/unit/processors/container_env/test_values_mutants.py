"""Value checks at the edges that mutation testing showed no test held (docs/dev/mutation.md)."""

from __future__ import annotations

import pytest

from otelgpu.processors.container_env.values import credential_kind

RANDOM_20 = "q8Zr2LmX7vT1kP4nW9sB"


def test_a_random_run_of_exactly_the_minimum_length_is_high_entropy() -> None:
    assert len(RANDOM_20) == 20
    assert credential_kind(RANDOM_20) == "high_entropy"
    assert credential_kind(RANDOM_20[:19]) is None  # one short of the minimum run


@pytest.mark.parametrize(
    "value",
    [
        "q8zr2lmx7vt1kp4nw9sb3yh6",  # no upper case
        "Q8ZR2LMX7VT1KP4NW9SB3YH6",  # no lower case
        "qZrLmXvTkPnWsByHaDcEfGjU",  # no digit
    ],
)
def test_a_random_run_must_mix_upper_lower_and_digits(value: str) -> None:
    assert credential_kind(value) is None


def test_a_long_run_is_measured_against_an_alphabet_of_64() -> None:
    # 65 characters with 5.115 bits each: at least 0.85 x log2(64) = 5.100 (caught), though
    # below 0.85 x log2(65) = 5.119; a run longer than 64 is held to the 64-symbol bar.
    run = "2C148YVD8M7FSI045e1516cWEGd3U5A0OJ24730bC1B6R96120X3P9Z0BHNTaKQLA"
    assert len(run) == 65
    assert credential_kind(run) == "high_entropy"


@pytest.mark.parametrize("value", ["kind: Deployment", "apiVersion: v1", "kind=batch apiVersion"])
def test_a_manifest_needs_both_api_version_and_kind(value: str) -> None:
    assert credential_kind(value) is None


@pytest.mark.parametrize("value", ['{"team": "vision"}', '  {"team": "vision", "budget": 3}'])
def test_a_json_object_is_a_document(value: str) -> None:
    assert credential_kind(value) == "embedded_document"


def test_a_json_object_without_a_string_key_is_a_document_once_parsed() -> None:
    assert credential_kind("{}") == "embedded_document"
    assert credential_kind("{oops") is None


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("Server=db&#59;Password&#61;hunter2x", "credential_pair"),  # HTML entities
        ("&#123;&quot;password&quot;: &quot;hunter2x&quot;&#125;", "credential_pair"),
        ("Authorization&#58; Bearer abc", "credential_pair"),
        ("Server=db\\u003bPassword\\u003dhunter2x", "credential_pair"),  # \uXXXX escapes
        ("{\\u0022password\\u0022: \\u0022x\\u0022}", "credential_pair"),
        ("tok\\u0065n=abc", "credential_pair"),
    ],
)
def test_a_secret_that_shows_only_once_its_escapes_are_decoded_is_refused(
    value: str, kind: str
) -> None:
    assert credential_kind(value) == kind
