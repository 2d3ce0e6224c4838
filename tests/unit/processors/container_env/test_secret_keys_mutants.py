"""Key rules that mutation testing showed no test held (docs/dev/mutation.md)."""

from __future__ import annotations

import pytest

from otelgpu.config.secret_keys import is_safe_key, key_refusal, looks_secret, normalise


@pytest.mark.parametrize("key", ["MYSQL_P\u200bWD", "DB_P\u00adW", "J\u200dWT"])
def test_invisible_characters_inside_a_short_word_are_removed_before_matching(key: str) -> None:
    # Short markers match whole words only: an invisible character left in place would split
    # `PWD` into `P` and `WD`, and the key would pass as ordinary.
    assert looks_secret(key)


def test_normalise_removes_format_characters() -> None:
    assert normalise("A\u200bB\u00adC\u200dD") == "abcd"


@pytest.mark.parametrize("key", ["!", "~", "A!~", "x-y_z.1/2"])
def test_printable_ascii_keys_are_safe_to_both_ends_of_the_range(key: str) -> None:
    assert is_safe_key(key)


@pytest.mark.parametrize("key", [" ", "\x7f", "A\x1fB", "caf\u00e9"])
def test_keys_outside_printable_ascii_are_unsafe(key: str) -> None:
    assert not is_safe_key(key)


@pytest.mark.parametrize(
    ("key", "plain"),
    [
        ("has\u0142o", "haslo"),
        ("HAS\u0141O", "HASLO"),
        ("pass\u00f8rd", "passord"),
        ("PASS\u00d8RD", "PASSORD"),
        ("db_pw\u0111", "db_pwd"),
        ("DB_PW\u0110", "DB_PWD"),
        ("t\u0153kn", "toekn"),
        ("T\u0152KN", "TOEKN"),
        ("pr\u0131vate", "private"),
    ],
)
def test_letters_without_an_accent_to_remove_are_mapped_to_latin(key: str, plain: str) -> None:
    assert normalise(key) == normalise(plain)
    assert looks_secret(key)


def test_key_refusal_refuses_secret_like_keys_unless_allowed() -> None:
    assert key_refusal("DB_PASSWORD") == "secret_key"
    assert key_refusal("DB_PASSWORD", allow_secret_like_keys=True) is None
    assert key_refusal("kapp.k14s.io/original", allow_secret_like_keys=True) == "spec_annotation"
    assert key_refusal("TE\u0410M", allow_secret_like_keys=True) == "unsafe_key"
    assert key_refusal("TEAM") is None


@pytest.mark.parametrize("key", ["sshKey", "sslCert", "dbConn", "gitPat", "s3Sig", "caf\u00e9Key"])
def test_camel_case_humps_split_words(key: str) -> None:
    # `key`, `cert`, `conn`, `pat` and `sig` match whole words only: without the split at the
    # hump, `sshkey` would be one ordinary word.
    assert looks_secret(key)
