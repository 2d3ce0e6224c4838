"""Key rules: include/exclude globs, secret-like refusal, value caps."""

from __future__ import annotations

import pytest

from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.keys import KeySelector, looks_secret


def _selector(
    include: list[str], exclude: tuple[str, ...] = (), *, allow_secret_like_keys: bool = False
) -> KeySelector:
    return KeySelector(
        "env",
        KeyFilter(include=include, exclude=list(exclude)),
        allow_secret_like_keys=allow_secret_like_keys,
        max_value_length=8,
    )


@pytest.mark.parametrize(
    "key",
    [
        "GITHUB_TOKEN",
        "db_password",
        "AWS_SECRET_ACCESS_KEY",
        "MYSQL_PASSWD",
        "api-key",
        "Credentials_File",
        "monkey",
        "ssh.Key.path",
    ],
)
def test_secret_like_keys(key: str) -> None:
    assert looks_secret(key)


@pytest.mark.parametrize("key", ["TEAM", "MLFLOW_RUN_ID", "PROJECT", "app.kubernetes.io/name"])
def test_ordinary_keys(key: str) -> None:
    assert not looks_secret(key)


def test_include_exclude_globs_and_exact_keys() -> None:
    sel = _selector(["TEAM", "MLFLOW_*"], ("MLFLOW_SKIP*",))
    got = sel.select([("TEAM", "ml"), ("TEAMS", "x"), ("MLFLOW_RUN", "r"), ("MLFLOW_SKIP1", "s")])
    assert got.values == {"TEAM": "ml", "MLFLOW_RUN": "r"}
    assert got.refused == []


def test_secret_like_keys_refused_whatever_include_says() -> None:
    got = _selector(["*"]).select([("TEAM", "ml"), ("HF_TOKEN", "hf_canary"), ("db_Password", "p")])
    assert got.values == {"TEAM": "ml"}
    assert got.refused == ["HF_TOKEN", "db_Password"]


def test_secret_like_keys_pass_when_allowed() -> None:
    got = _selector(["HF_TOKEN"], allow_secret_like_keys=True).select([("HF_TOKEN", "t")])
    assert got.values == {"HF_TOKEN": "t"}


def test_excluded_secret_is_not_a_refusal() -> None:
    got = _selector(["*"], ("*TOKEN*",)).select([("HF_TOKEN", "t")])
    assert got.values == {} and got.refused == []


def test_long_values_are_cut_and_counted() -> None:
    got = _selector(["*"]).select([("A", "123456789abc"), ("B", "12345678")])
    assert got.values == {"A": "12345678", "B": "12345678"}
    assert got.truncated == 1


def test_empty_include_reads_nothing() -> None:
    def never() -> object:
        raise AssertionError("an empty include list must not even read the data")
        yield

    sel = _selector([])
    assert not sel.enabled
    assert sel.select(never()).values == {}  # type: ignore[arg-type]
