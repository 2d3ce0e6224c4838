"""The plain-value rule: what a value must be for a key that only a glob matched.

`plain_refusal` is the stricter rule for a value whose key only a glob matched (the key was
not named in the include list): such a value is exported only when it is plainly safe, and
is otherwise refused for the first of these reasons:
- `glob_long_value`: longer than 64 characters;
- `glob_unsafe_characters`: a character other than ASCII letters, digits, space and `._/:-`
  (so no `=`, `@`, `{`, `;`, `&`, `%`, `+`, `,`, quotes, tabs or newlines: no pairs, no
  documents, no URL user info, no encodings);
- `glob_command_line`: an option (`-x`, `--name`) at the start or after a space;
- `glob_secret_word`: a word the key rules refuse (`password`, `token`, `auth`, ...);
- `glob_pair`: two parts and one `:` or `/` (`user:password`, `user/password`), the second
  not a number or a version (`db:5432`, `python:3.11` pass);
- `glob_grouped_key`: three or more groups of one length joined by one of `-._:`, three of
  them different, a digit among them, 12 characters or more (licence-style and dotted keys,
  colon-hex key material);
- `glob_random_value`: an alphanumeric stretch that reads as random (value_randomness.py's
  `has_random_segment`): random tokens, passwords, hex IDs, UUIDs, commit SHAs.
"""

from __future__ import annotations

import re

from otelgpu.config.secret_keys import mentions_secret
from otelgpu.processors.container_env.value_randomness import has_random_segment

GLOB_LONG_VALUE = "glob_long_value"
GLOB_UNSAFE_CHARACTERS = "glob_unsafe_characters"
GLOB_COMMAND_LINE = "glob_command_line"
GLOB_SECRET_WORD = "glob_secret_word"
GLOB_RANDOM_VALUE = "glob_random_value"
GLOB_PAIR = "glob_pair"
GLOB_GROUPED_KEY = "glob_grouped_key"
GLOB_REASONS = frozenset(
    {
        GLOB_LONG_VALUE,
        GLOB_UNSAFE_CHARACTERS,
        GLOB_COMMAND_LINE,
        GLOB_SECRET_WORD,
        GLOB_PAIR,
        GLOB_GROUPED_KEY,
        GLOB_RANDOM_VALUE,
    }
)

MAX_PLAIN_LENGTH = 64
_PLAIN = re.compile(r"[A-Za-z0-9 ._/:\-]*")
_PLAIN_OPTION = re.compile(r"(?:^| )--?[A-Za-z]")
# `user:password` or `user/password`: two parts and one separator, the second not a number
# or a version (`db:5432`, `python:3.11` pass).
_GLOB_PAIR = re.compile(r"([^\s:/]+)[:/]([^\s:/]+)")
_VERSION = re.compile(r"[0-9][0-9.]*")
# Three or more groups of one length joined by one kind of separator, three of them or more
# different, a digit among them: licence keys (`ABCD-EF12-...`), dotted random keys, key
# fingerprints and key material in colon-hex.
_GROUPED = re.compile(r"[A-Za-z0-9]{2,}(?:([-.:_])[A-Za-z0-9]{2,})(?:\1[A-Za-z0-9]{2,})+")
MIN_GROUPED_LENGTH = 12
MIN_DISTINCT_GROUPS = 3
_DIGIT = re.compile(r"[0-9]")


def plain_refusal(value: str) -> str | None:
    """Why `value` is not plainly safe for a key only a glob matched (module doc), or None.
    Meant for values `values.credential_kind` found nothing in."""
    if len(value) > MAX_PLAIN_LENGTH:
        return GLOB_LONG_VALUE
    if not _PLAIN.fullmatch(value):
        return GLOB_UNSAFE_CHARACTERS
    if _PLAIN_OPTION.search(value):
        return GLOB_COMMAND_LINE
    if mentions_secret(value):
        return GLOB_SECRET_WORD
    if _is_glob_pair(value):
        return GLOB_PAIR
    if _is_grouped_key(value):
        return GLOB_GROUPED_KEY
    if has_random_segment(value):
        return GLOB_RANDOM_VALUE
    return None


def _is_glob_pair(value: str) -> bool:
    pair = _GLOB_PAIR.fullmatch(value)
    return pair is not None and not _VERSION.fullmatch(pair.group(2))


def _is_grouped_key(value: str) -> bool:
    """Three or more groups of one length, one separator, 12 characters or more in all,
    three groups or more different, a digit among them."""
    if not (grouped := _GROUPED.fullmatch(value)):
        return False
    groups = value.split(grouped.group(1))
    return (
        len({len(g) for g in groups}) == 1
        and len(set(groups)) >= MIN_DISTINCT_GROUPS
        and sum(map(len, groups)) >= MIN_GROUPED_LENGTH
        and _DIGIT.search(value) is not None
    )
