"""A key matched only by a glob exports its value only when the value is plainly safe; a key
named exactly in the include list keeps the ordinary value checks."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.audit import REFUSED, Audit
from otelgpu.processors.container_env.keys import KeySelector
from tests.unit.processors.container_env.helpers import counter

CANARY = "canary-glob-5e6f7a8b"


def _select(
    include: list[str], pairs: list[tuple[str, str]]
) -> tuple[dict[str, str], dict[str, str]]:
    selector = KeySelector(
        "env", KeyFilter(include=include), allow_secret_like_keys=False, max_value_length=256
    )
    got = selector.select(pairs)
    return got.values, {str(k): getattr(k, "reason", "?") for k in got.refused}


@pytest.mark.parametrize(
    "value",
    [
        "vision",
        "cc-42",
        "Team Vision",
        "http://mlflow.example.com:5000",
        "nvcr.io/nvidia/pytorch:24.01-py3",
        "Qwen2.5-72B-Instruct-GPTQ-Int4",
        "python:3.11",
        "db.example.com:5432",
        "ResNet50V2ImageNetTrainingRun2024Q3",
        "2024-05-01T12:00:00Z",
        "en_US.UTF-8",
        "GPU-e2e00000-0000-4000-8000-000000000000",
        "arn:aws:iam::123456789012:role/MyRole-Prod2024",
        "7d4b9c8f6d",  # a pod-template-hash
        "x" * 64,  # the longest plain value
        "abcdef1ghijk",  # mostly words, and 2 letter/digit switches in 12 characters
        "us-east-1-az1",  # groups of different lengths
        "team-team-team-42",
        "",
    ],
)
def test_a_glob_exports_plainly_safe_values(value: str) -> None:
    assert _select(["*"], [("SETTING", value)]) == ({"SETTING": value}, {})


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("x" * 65, "glob_long_value"),
        (f"{CANARY}=1", "glob_unsafe_characters"),
        (f"{CANARY}@example.com", "glob_unsafe_characters"),
        ("http://deploy@example.com", "credential_url"),  # any user info, whatever the key
        (f"{{{CANARY}}}", "glob_unsafe_characters"),
        (f"a\n{CANARY}", "glob_unsafe_characters"),
        (f"a;{CANARY}", "glob_unsafe_characters"),
        (f"a&{CANARY}", "glob_unsafe_characters"),
        (f"{CANARY},x", "glob_unsafe_characters"),
        (f"{CANARY}\tx", "glob_unsafe_characters"),
        (f"caf\u00e9 {CANARY}", "glob_unsafe_characters"),
        (f"deploy -k {CANARY}", "glob_command_line"),
        (f"--user {CANARY}", "glob_command_line"),
        ("password correcthorse", "glob_secret_word"),
        ("machine h login u password batterystaple", "glob_secret_word"),
        (f"session {CANARY}", "glob_secret_word"),
        ("d41d8cd98f00b204e9800998ecf8427e", "glob_random_value"),
        ("791ee84e-c263-4f4c-a4cd-a090b82be768", "glob_random_value"),
        ("3f2a1b4c5d6e7f8091a2b3c4d5e6f708192a3b4c", "glob_random_value"),
        ("Xk9mP2qL7vN4", "glob_random_value"),
        ("hunter2 Xk9mP2qL7vN4wZ", "glob_random_value"),
        # mostly words, but 3 letter/digit switches in 12 characters: random all the same
        ("abcde1fghij2", "glob_random_value"),
        (f"deploy:{CANARY}", "glob_pair"),  # user:password
        (f"deploy/{CANARY}", "glob_pair"),  # user/password
        ("Qwen/Qwen2.5-72B-Instruct", "glob_pair"),  # name the key to export it
        ("6FJ8-2YP3-54PT-RIC6", "glob_grouped_key"),
        ("xk3f.9qpl.m2vz.a8rt", "glob_grouped_key"),
        ("0c:29:3f:8a:d9:82:59:70:c9:94:bf:48:62:84:f0:22", "glob_grouped_key"),
    ],
)
def test_a_glob_refuses_values_that_are_not_plainly_safe(value: str, reason: str) -> None:
    assert _select(["*"], [("SETTING", value)]) == ({}, {"SETTING": reason})


def test_every_glob_is_held_to_the_rule_not_only_the_star() -> None:
    values, refused = _select(["MLFLOW_*"], [("MLFLOW_RUN_ID", "d41d8cd98f00b204e9800998ecf8427e")])
    assert values == {} and refused == {"MLFLOW_RUN_ID": "glob_random_value"}


def test_a_pattern_spelled_like_its_key_names_nothing() -> None:
    # `DATA*` matches the key `DATA*` (a literal match) but is still a glob: it fails closed.
    values, refused = _select(["DATA*"], [("DATA*", "a=b")])
    assert values == {} and refused == {"DATA*": "glob_unsafe_characters"}


def test_keys_named_exactly_keep_the_ordinary_value_checks() -> None:
    pairs = [
        ("MLFLOW_TRACKING_URI", "https://mlflow.example.com/api?team=vision&env=prod"),
        ("MLFLOW_RUN_ID", "d41d8cd98f00b204e9800998ecf8427e"),
        ("OTHER_URI", "https://mlflow.example.com/api?team=vision&env=prod"),
        ("DATABASE_URL", f"postgres://app:{CANARY}@db/x"),
    ]
    values, refused = _select(["MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "DATABASE_URL", "*"], pairs)
    assert values == dict(pairs[:2])
    assert refused == {"OTHER_URI": "glob_unsafe_characters", "DATABASE_URL": "credential_url"}


def test_glob_refusals_are_counted_by_reason_and_logged_by_key_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    telemetry = SelfTelemetry()
    audit = Audit("container_env", telemetry, logging.getLogger("test.glob"))
    pairs = [("CONFIG", f"a={CANARY}"), ("NOTE", f"session {CANARY}"), ("TEAM", "vision")]
    for _ in range(2):  # two containers with the same keys
        selector = KeySelector(
            "env", KeyFilter(include=["*"]), allow_secret_like_keys=False, max_value_length=256
        )
        got = selector.select(pairs)
        assert got.values == {"TEAM": "vision"}
        audit.refused("env", got.refused)
    assert counter(telemetry, REFUSED, section="env", reason="glob_unsafe_characters") == 2
    assert counter(telemetry, REFUSED, section="env", reason="glob_secret_word") == 2
    assert CANARY not in caplog.text
    assert caplog.text.count("'CONFIG'") == 1
    assert "not exporting env key 'CONFIG': it matched only a glob" in caplog.text
