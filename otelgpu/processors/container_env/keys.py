"""Which runtime keys may leave the node: include/exclude filters, secret refusal, value caps."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from otelgpu.config.types import KeyFilter

# Substrings that make a key look like it holds a secret, compared case-insensitively
# (`*TOKEN*`, `*SECRET*`, ...). Deliberately broad: a refused key costs a label, an
# exported secret costs a credential rotation.
SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL")


def looks_secret(key: str) -> bool:
    """Whether `key` matches one of the secret-like globs."""
    upper = key.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


@dataclass(slots=True)
class Selection:
    """What one section of one container yields: the kept values, the refused key names
    (never their values) and how many values were cut to the length cap."""

    values: dict[str, str] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    truncated: int = 0


class KeySelector:
    """Chooses the keys of one section (`env`, `labels`, `pod_labels`, `annotations`).

    A key is kept when the filter includes it, no exclude pattern matches it, and it does
    not look like a secret (unless secret-like keys are allowed). Values of other keys are
    never copied, so nothing outside the include list outlives the call.
    """

    def __init__(
        self,
        section: str,
        key_filter: KeyFilter,
        *,
        allow_secret_like_keys: bool,
        max_value_length: int,
    ) -> None:
        self.section = section
        self._filter = key_filter
        self._allow_secrets = allow_secret_like_keys
        self._max_len = max_value_length

    @property
    def enabled(self) -> bool:
        """False when the include list is empty: the section is never read at all."""
        return bool(self._filter.include)

    def select(self, pairs: Iterable[tuple[str, str]]) -> Selection:
        """Filters `(key, value)` pairs; `pairs` may be a lazy iterator over raw data."""
        selection = Selection()
        if not self.enabled:
            return selection
        for key, value in pairs:
            if not self._filter.allows(key):
                continue
            if not self._allow_secrets and looks_secret(key):
                selection.refused.append(key)
                continue
            if len(value) > self._max_len:
                value = value[: self._max_len]
                selection.truncated += 1
            selection.values[key] = value
        return selection
