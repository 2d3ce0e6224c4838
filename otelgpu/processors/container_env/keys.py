"""Which runtime keys may leave the node: include/exclude filters, refusals, value caps.

An included key is refused, for the reason named, when:
- `unsafe_key`: it is not plain printable ASCII (`secret_keys.is_safe_key`): a disguise;
- `spec_annotation`: it is an annotation that carries a whole object (`SPEC_KEYS`);
- `secret_key`: it looks like it names a secret (`secret_keys.looks_secret`), unless
  `allow_secret_like_keys` is set;
- a value reason (`values.credential_kind`): its value looks like a credential or a spec;
- a `glob_*` reason (`values.plain_refusal`): no include entry names the key exactly (only
  a glob matched it) and its value is not plainly safe. An include list is the operator's
  word for the keys it names; a glob is not, so what it lets through must fail closed.
Only `secret_key` can be switched off. A refused key's name travels on as a `RefusedKey`
(a `str` that carries its reason), so the caller can count and log it; its value never does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from otelgpu.config.secret_keys import (
    SECRET_KEY,
    SPEC_ANNOTATION,
    SPEC_KEYS,
    UNSAFE_KEY,
    is_spec_key,
    key_refusal,
    looks_secret,
)
from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.values import credential_kind, plain_refusal

__all__ = [
    "SECRET_KEY",
    "SPEC_ANNOTATION",
    "SPEC_KEYS",
    "UNSAFE_KEY",
    "KeySelector",
    "RefusedKey",
    "Selection",
    "is_spec_key",
    "looks_secret",
    "refusal",
]

# Values are checked on their first `max_value_length + CHECK_MARGIN` characters: all of
# what is exported, and enough beyond the cut to see the shape of a credential that starts
# inside it (a URL's `user:password@` is at most 513 characters here). A bounded span keeps
# the checks linear in the number of keys whatever size the runtime's values have.
CHECK_MARGIN = 1024

_GLOB_CHARACTERS = frozenset("*?[")


class RefusedKey(str):
    """The name of a refused key, carrying the reason it was refused; never its value."""

    reason: str

    def __new__(cls, key: str, reason: str) -> RefusedKey:
        refused = super().__new__(cls, key)
        refused.reason = reason
        return refused


def refusal(
    key: str, value: str, *, allow_secret_like_keys: bool = False, named: bool = True
) -> str | None:
    """Why an included `key` with `value` must not be exported, or None (module doc).
    `named`: an include entry names `key` exactly; False when only a glob matched it."""
    if (reason := key_refusal(key, allow_secret_like_keys=allow_secret_like_keys)) is not None:
        return reason
    reason = credential_kind(value)
    if reason is None and not named:
        reason = plain_refusal(value)
    return reason


@dataclass(slots=True)
class Selection:
    """What one section of one container yields: the kept values, the refused key names
    (`RefusedKey`s, never their values) and how many values were cut to the length cap."""

    values: dict[str, str] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    truncated: int = 0


class KeySelector:
    """Chooses the keys of one section (`env`, `labels`, `pod_labels`, `annotations`).

    A key is kept when the filter includes it, no exclude pattern matches it, and `refusal`
    finds nothing wrong with it or its value (held to the plain-value rule when no include
    entry names the key exactly). Values of other keys are never copied (nor looked at), so
    nothing outside the include list outlives the call.
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
        # Keys named exactly; a pattern with a wildcard names no key, even one spelled like it.
        self._named = frozenset(p for p in key_filter.include if not _GLOB_CHARACTERS & set(p))

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
            checked = value[: self._max_len + CHECK_MARGIN]
            reason = refusal(
                key, checked, allow_secret_like_keys=self._allow_secrets, named=key in self._named
            )
            if reason is not None:
                selection.refused.append(RefusedKey(key, reason))
                continue
            if len(value) > self._max_len:
                value = value[: self._max_len]
                selection.truncated += 1
            selection.values[key] = value
        return selection
