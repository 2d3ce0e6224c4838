"""Value checks: credentials that hide under innocent key names, and the plain-value rule.

A key such as `DATABASE_URL` or `SENTRY_DSN` says nothing secret, yet its value carries a
password. Every value an include list asks for goes through `credential_kind` before it is
kept; a value that looks like a credential is refused whatever its key, whatever the include
list and `allow_secret_like_keys` say. The reason is counted; the value is never logged.

`credential_kind` looks at every reading of the value (value_decoding.py: the value, then
what its escapes and encodings decode to, layer after layer) for the credential shapes
(value_shapes.py), and gives the first it finds, in this order: `credential_url`,
`credential_pair`, `pem`, `jwt`, `known_token`, `password_hash`, `credential_flag`,
`credential_header`, `embedded_document` (and `pem` for key bytes that decoding exposed).
When no reading holds one, it gives `high_entropy` for a value with a run that reads as
random (value_randomness.py).

`plain_refusal` (glob_values.py) is the stricter rule for a value whose key only a glob
matched: it is exported only when it is plainly safe.

This module is where the rest of the component takes the value rules from.
"""

from __future__ import annotations

from otelgpu.processors.container_env.glob_values import GLOB_REASONS, plain_refusal
from otelgpu.processors.container_env.value_decoding import MAX_LAYERS, readings
from otelgpu.processors.container_env.value_randomness import HIGH_ENTROPY, has_random_run
from otelgpu.processors.container_env.value_shapes import binary_shape, text_shape

__all__ = ["GLOB_REASONS", "MAX_LAYERS", "credential_kind", "plain_refusal"]


def credential_kind(value: str) -> str | None:
    """The reason `value` looks like a credential (module doc), or None when it does not."""
    for reading in readings(value):
        reason = binary_shape(reading) if isinstance(reading, bytes) else text_shape(reading)
        if reason is not None:
            return reason
    if has_random_run(value):
        return HIGH_ENTROPY
    return None
