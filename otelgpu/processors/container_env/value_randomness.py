"""Value randomness: whether a value holds a run that reads as random (a token, a key).

Two bars, one for each value rule:
- `has_random_run` (the `high_entropy` reason of every value): a run of at least 20
  characters without spaces or punctuation (`/`, `+`, `-`, `_` belong to base64 and stay in
  the run) that mixes upper case, lower case and digits, holds an alphanumeric stretch of 12
  characters or more, is not a digest (`sha512-...`), whose Shannon entropy is at least
  0.85 x log2(min(length, 64)) bits per character, and less than 60 % of which is word-like
  (`[A-Z]?[a-z]{3,}`). Random tokens and keys pass all of these; hex IDs (MLflow run IDs,
  digests, container IDs) and UUIDs are never mixed case, and camelCase names, model names,
  branch names and paths are mostly words or short stretches. A heuristic: measured on
  random alphanumeric and base64 tokens of 20-40 characters it catches 95-97 % (the shapes
  of value_shapes.py catch the common tokens whatever their entropy).
- `has_random_segment` (the stricter plain-value rule's `glob_random_value`): an
  alphanumeric stretch of 12 characters or more that mixes two of upper case, lower case and
  digits, has at least 0.75 x log2(min(length, alphabet)) bits per character (the alphabet
  is 16 for hex, else the letters and digits it uses), and is less than 60 % word-like
  (`[A-Z]?[a-z]{2,}`) or switches between letters and digits at least once every 4
  characters: random tokens, passwords, hex IDs, UUIDs, commit SHAs. Measured on random
  stretches of 12-32 characters it catches 84-100 % (hex of 12-16: 85-89 %), while names
  such as `ResNet50V2ImageNet`, `checkpoint0042` and `20240501T120000Z` pass.
"""

from __future__ import annotations

import math
import re
from collections import Counter

HIGH_ENTROPY = "high_entropy"

_RUN_SPLIT = re.compile(r"[\s\"',;:=&?#@()\[\]{}<>|\\.]+")
_SEGMENTS = re.compile(r"[A-Za-z0-9]+")
MIN_RANDOM_STRETCH = 12  # a random run holds an alphanumeric stretch this long
# A digest in the Subresource Integrity or OCI form: random by construction, never a key.
_DIGEST = re.compile(r"(?:sha(?:1|224|256|384|512)|md5|blake2b?)[-:]", re.IGNORECASE)

MIN_ENTROPY_RUN = 20
ENTROPY_FRACTION = 0.85  # of the most a run of that length can have (alphabet of 64)
MAX_WORD_COVER = 0.6
_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}")
_UPPER, _LOWER, _DIGIT = re.compile(r"[A-Z]"), re.compile(r"[a-z]"), re.compile(r"[0-9]")

_SEGMENT_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
MIN_RANDOM_SEGMENT = 12
PLAIN_ENTROPY_FRACTION = 0.75
MIN_SWITCH_RATE = 0.25  # letter/digit switches per character of a random stretch
_PLAIN_WORDLIKE = re.compile(r"[A-Z]?[a-z]{2,}")
_SWITCH = re.compile(r"(?<=[0-9])(?=[A-Za-z])|(?<=[A-Za-z])(?=[0-9])")


def has_random_run(value: str) -> bool:
    """Whether a run of `value` is random to the `high_entropy` bar (module doc)."""
    return any(_is_random(run) for run in _RUN_SPLIT.split(value) if len(run) >= MIN_ENTROPY_RUN)


def has_random_segment(value: str) -> bool:
    """Whether an alphanumeric stretch of `value` is random to the plain-value rule's bar
    (module doc)."""
    return any(_is_random_segment(s) for s in _SEGMENT_SPLIT.split(value))


def _is_random(run: str) -> bool:
    """Mixed-case-and-digits runs, of high entropy, mostly not words (module doc)."""
    if not (_UPPER.search(run) and _LOWER.search(run) and _DIGIT.search(run)):
        return False
    if _DIGEST.match(run) or max(map(len, _SEGMENTS.findall(run))) < MIN_RANDOM_STRETCH:
        return False
    return _entropy(run) >= ENTROPY_FRACTION * math.log2(min(len(run), 64)) and _few_words(run)


def _is_random_segment(segment: str) -> bool:
    """An alphanumeric stretch that looks random to the plain-value rule (module doc)."""
    n = len(segment)
    if n < MIN_RANDOM_SEGMENT:
        return False
    upper, lower, digit = (bool(p.search(segment)) for p in (_UPPER, _LOWER, _DIGIT))
    if upper + lower + digit < 2:
        return False
    alphabet = 16 if _HEX.fullmatch(segment) else 26 * upper + 26 * lower + 10 * digit
    if _entropy(segment) < PLAIN_ENTROPY_FRACTION * math.log2(min(n, alphabet)):
        return False
    # Random lowercase reads as "words" to the pattern; it switches to digits far more often.
    switches = len(_SWITCH.findall(segment))
    return _few_words(segment, _PLAIN_WORDLIKE) or switches >= MIN_SWITCH_RATE * n


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _few_words(text: str, wordlike: re.Pattern[str] = _WORDLIKE) -> bool:
    return sum(map(len, wordlike.findall(text))) < MAX_WORD_COVER * len(text)
