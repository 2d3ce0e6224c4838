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


LOGGER = "test.audit.edges"


def _audit(telemetry: SelfTelemetry | None = None) -> Audit:
    return Audit("container_env", telemetry or SelfTelemetry(), logging.getLogger(LOGGER))


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def _refused_and_logged(
    caplog: pytest.LogCaptureFixture, section: str, include: str, pairs: list[tuple[str, str]]
) -> list[str]:
    """What the audit logs of the keys `section`'s selector (`include`) refuses of `pairs`."""
    caplog.set_level(logging.DEBUG)
    selector = KeySelector(
        section, KeyFilter(include=[include]), allow_secret_like_keys=False, max_value_length=256
    )
    _audit().refused(section, selector.select(pairs).refused)
    return _lines(caplog)


def test_a_refused_spec_annotation_is_logged_as_carrying_a_whole_object_spec(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = "kubectl.kubernetes.io/last-applied-configuration"
    assert _refused_and_logged(caplog, "annotations", "*", [(key, '{"kind": "Pod"}')]) == [
        f"not exporting annotations key '{key}': "
        "it carries a whole object spec, env values included"
    ]


def test_a_key_only_a_glob_matched_is_logged_with_how_to_export_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _refused_and_logged(caplog, "env", "RUN_*", [("RUN_CMD", "a b; c!")]) == [
        "not exporting env key 'RUN_CMD': it matched only a glob and its value is not plainly "
        "safe (glob_unsafe_characters); name the key exactly in the include list to export it "
        "(the credential checks still apply)"
    ]


def test_plain_key_names_count_as_secret_keys() -> None:
    telemetry = SelfTelemetry()
    Audit("p", telemetry, logging.getLogger("test.audit")).refused("labels", ["HF_TOKEN"])
    assert counter(telemetry, REFUSED, section="labels", reason="secret_key") == 1


def test_a_key_name_of_200_characters_is_logged_whole(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    _audit().refused("env", ["K" * 200])
    (line,) = _lines(caplog)
    assert f"'{'K' * 200}':" in line
    assert "..." not in line


def test_a_key_name_of_201_characters_is_logged_cut_to_200_and_marked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    _audit().refused("env", ["K" * 201])
    (line,) = _lines(caplog)
    assert f"'{'K' * 200}...':" in line
    assert "K" * 201 not in line


def test_past_1024_distinct_names_one_warning_says_names_are_no_longer_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    telemetry = SelfTelemetry()
    audit = _audit(telemetry)
    audit.refused("env", [f"KEY_{i:04d}" for i in range(1024)])
    assert len(_lines(caplog)) == 1024  # every name so far, once each
    audit.refused("env", [f"KEY_{i:04d}" for i in range(1024, 1030)])
    audit.refused("labels", ["ANOTHER_ONE"])
    lines = _lines(caplog)
    names = [line for line in lines if line.startswith("not exporting")]
    overflow = [line for line in lines if line.startswith("more than")]
    assert len(names) == 1024
    assert not any("KEY_1024" in line or "ANOTHER_ONE" in line for line in lines)
    assert overflow == ["more than 1024 distinct keys refused; no longer logging their names"]
    # the counter keeps going after the log stops
    assert counter(telemetry, REFUSED, section="env", reason="secret_key") == 1030
    assert counter(telemetry, REFUSED, section="labels", reason="secret_key") == 1


def test_huge_key_names_are_logged_cut(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    audit = Audit("p", SelfTelemetry(), logging.getLogger("test.audit"))
    audit.refused("env", ["K" * 70_000])
    assert 200 <= len(caplog.text) < 1_000
