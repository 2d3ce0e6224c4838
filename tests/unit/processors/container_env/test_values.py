"""Value checks: credentials under innocent keys are found; business values are not."""

from __future__ import annotations

import base64
import json
import random
import string

import pytest

from otelgpu.processors.container_env.values import credential_kind

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpM"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("mysql://root:hunter2@db:3306/app", "credential_url"),
        ("redis://:p4ss@cache:6379/0", "credential_url"),  # password without a user
        ("https://x-access-token:abc@github.com/org/repo.git", "credential_url"),
        ("https://o1.ingest.sentry.io/api/1/store/?sentry_key=abc", "credential_url"),
        ("https://blob.example.com/c?sv=1&sig=abc", "credential_url"),
        ("https://git@github.com/org/repo.git", "credential_url"),  # any user info
        ("https://abc123@o1.ingest.sentry.io/1", "credential_url"),  # a short DSN key
        ("\\x70\\x61\\x73\\x73word=hunter2", "credential_pair"),  # \xNN escapes
        ("\\u0070assword=hunter2", "credential_pair"),  # \uXXXX escapes
        ("host=db user=app password=s3cret", "credential_pair"),
        ("Server=tcp:db;Database=x;User Id=u;Password=p;", "credential_pair"),
        ('{"auth": "dXNlcjpwYXNz"}', "credential_pair"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "pem"),
        (base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMII").decode(), "pem"),
        (JWT, "jwt"),
        ("Bearer " + JWT, "jwt"),
        ("ghp_" + "a1B2" * 9, "known_token"),
        ("hf_" + "aBcDeFgHiJ" * 3 + "kLmN", "known_token"),
        ("AKIAIOSFODNN7EXAMPLE", "known_token"),
        ("xoxb-1234-5678-abcdefgh", "known_token"),
        ('{"apiVersion":"v1","kind":"Pod","spec":{}}', "embedded_document"),
        ("[1, 2, 3]", "embedded_document"),
        ("apiVersion: v1\nkind: Pod\nspec: {}", "embedded_document"),
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "high_entropy"),
        ("q8Zr2LmX7vT1kP4nW9sB3yH6", "high_entropy"),
    ],
)
def test_credentials_are_found(value: str, reason: str) -> None:
    assert credential_kind(value) == reason


@pytest.mark.parametrize(
    "value",
    [
        "vision",
        "run-7",
        "",
        "d41d8cd98f00b204e9800998ecf8427e",  # MLflow run IDs are hex
        "791ee84e-c263-4f4c-a4cd-a090b82be768",
        "sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
        "GPU-e2e00000-0000-4000-8000-000000000000",
        "http://mlflow.example.com:5000",
        "postgres://db.example.com:5432/app?sslmode=require",
        "host=db user=app dbname=x sslmode=require",
        "nvcr.io/nvidia/pytorch:24.01-py3",
        "/opt/models/ResNet50V2/weights/final.pt",
        "ResNet50V2ImageNetTrainingRun2024Q3",
        "MyProjectName2024FinalVersion",
        "BertForSequenceClassification",
        "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4",
        "KubernetesPodOperator-task-2024-05-01T12:00:00",
        "arn:aws:iam::123456789012:role/MyRole-Prod2024",
        "Team Vision, budget 2024Q3 (ML-Platform)",
        "{not json",
        "en_US.UTF-8",
    ],
)
def test_business_values_pass(value: str) -> None:
    assert credential_kind(value) is None


def test_most_random_tokens_are_high_entropy() -> None:
    """The heuristic's catch rate, as the module doc states it (seeded, so it is exact)."""
    rng = random.Random(3)
    alphabet = string.ascii_letters + string.digits
    tokens = ["".join(rng.choice(alphabet) for _ in range(32)) for _ in range(500)]
    caught = sum(credential_kind(t) is not None for t in tokens)
    assert caught >= 0.95 * len(tokens)


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


def test_a_pod_spec_in_any_shape_is_a_document() -> None:
    spec = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"env": []}]}}
    assert credential_kind(json.dumps(spec, indent=2)) == "embedded_document"
