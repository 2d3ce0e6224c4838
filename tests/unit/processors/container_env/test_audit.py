"""The audit: refusals counted by reason, key names logged once, values never logged."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.audit import REFUSED, Audit
from otelgpu.processors.container_env.keys import KeySelector
from tests.unit.processors.container_env.helpers import counter

CANARY = "canary-4f1d9e"
PAIRS = [
    ("DATABASE_URL", f"postgres://app:{CANARY}@db/x"),
    ("SENTRY_DSN", f"https://{CANARY}@sentry.example.com/1"),
    ("TO\u200bKEN", CANARY),
    ("kubectl.kubernetes.io/last-applied-configuration", f'{{"env": "{CANARY}"}}'),
    ("NOTE", f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx{CANARY}In0.sig"),
    ("TEAM", "ml"),
]


def test_refusals_are_counted_by_reason_and_never_logged_with_their_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    telemetry = SelfTelemetry()
    audit = Audit("container_env", telemetry, logging.getLogger("test.audit"))
    selector = KeySelector(
        "env", KeyFilter(include=["*"]), allow_secret_like_keys=False, max_value_length=256
    )
    got = selector.select(PAIRS)
    assert got.values == {"TEAM": "ml"}
    audit.refused("env", got.refused)
    audit.refused("env", got.refused)  # a second container with the same keys
    expected = {
        "credential_url": 2,
        "secret_key": 2,  # SENTRY_DSN
        "unsafe_key": 2,
        "spec_annotation": 2,
        "jwt": 2,
    }
    for reason, n in expected.items():
        assert counter(telemetry, REFUSED, section="env", reason=reason) == n, reason
    assert counter(telemetry, REFUSED) == 10
    assert CANARY not in caplog.text
    assert caplog.text.count("'DATABASE_URL'") == 1  # once per key name
    assert "'DATABASE_URL': its value looks like a credential or a spec (credential_url)" in (
        caplog.text
    )
    assert "'TO\\u200bKEN': it is not plain printable ASCII" in caplog.text
    assert "'SENTRY_DSN': it looks like a secret" in caplog.text


def test_plain_key_names_count_as_secret_keys() -> None:
    telemetry = SelfTelemetry()
    Audit("p", telemetry, logging.getLogger("test.audit")).refused("labels", ["HF_TOKEN"])
    assert counter(telemetry, REFUSED, section="labels", reason="secret_key") == 1


def test_huge_key_names_are_logged_cut(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    audit = Audit("p", SelfTelemetry(), logging.getLogger("test.audit"))
    audit.refused("env", ["K" * 70_000])
    assert 200 <= len(caplog.text) < 1_000
