"""The config model: defaults are the documented defaults; bad values are refused."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from tests.unit.config.pipelines import MINIMAL, validated
from tests.unit.processors.container_env.helpers import config

EVERY_TEAM = {"include": ["team*", "*team"]}


def test_defaults() -> None:
    cfg = config()
    assert cfg.runtime == "auto"
    assert cfg.containerd.socket == "/run/containerd/containerd.sock"
    assert cfg.containerd.namespace == "k8s.io"
    assert cfg.docker.socket == "/var/run/docker.sock"
    assert cfg.refresh_interval == 10.0
    assert cfg.env.include == cfg.labels.include == cfg.pod_labels.include == []
    assert cfg.annotations.include == []
    assert cfg.allow_secret_like_keys is False
    assert (cfg.max_value_length, cfg.max_attributes) == (256, 32)


def test_a_runtime_request_is_limited_to_five_seconds_by_default() -> None:
    assert config().timeout == 5.0
    assert config(timeout="250ms").timeout == 0.25


def test_workload_owners_are_added_unless_turned_off() -> None:
    assert config().owners is True
    assert config(owners=False).owners is False


def test_full_config() -> None:
    cfg = config(
        runtime="docker",
        docker={"socket": "/run/docker.sock"},
        containerd={"socket": "/host/containerd.sock"},
        refresh_interval="500ms",
        env={"include": ["TEAM", "MLFLOW_*"], "exclude": ["MLFLOW_X"]},
        max_value_length=1,
        max_attributes=1,
    )
    assert (cfg.docker.socket, cfg.containerd.socket) == (
        "/run/docker.sock",
        "/host/containerd.sock",
    )
    assert (cfg.max_value_length, cfg.max_attributes) == (1, 1)
    assert cfg.runtime == "docker" and cfg.refresh_interval == 0.5
    assert cfg.env.allows("MLFLOW_RUN") and not cfg.env.allows("MLFLOW_X")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"runtime": "crio"}, "Input should be 'auto', 'containerd' or 'docker'"),
        ({"containerd": {"socket": "run/containerd.sock"}}, "must be an absolute path"),
        ({"docker": {"socket": "docker.sock"}}, r'must be an absolute path \(got "docker.sock"\)'),
        ({"containerd": {"namespace": ""}}, "at least 1 character"),
        ({"refresh_interval": "0s"}, "greater than 0"),
        ({"refresh_interval": 10}, "invalid duration"),
        ({"max_attributes": 0}, "greater than 0"),
        ({"max_value_length": 0}, "greater than 0"),
        ({"env": {"include": "TEAM"}}, "valid list"),
        ({"envs": {}}, "Extra inputs are not permitted"),
    ],
)
def test_bad_values(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        config(**options)


def _validate_with(options: str) -> None:
    """A pipeline through container_env with these options, validated as `validate` does."""
    text = (
        "processors:\n  container_env:\n    runtime: docker\n"
        + "".join(f"    {line}\n" for line in options.splitlines())
        + "service:\n  pipelines:\n    metrics: {processors: [container_env]}\n"
    )
    validated(MINIMAL, text)


@pytest.mark.parametrize("section", ["env", "annotations"])
@pytest.mark.parametrize("pattern", ["*", "**", "?*", "*_*", "*.*", "[A-Z]*", "*/*"])
def test_a_bare_wildcard_over_env_or_annotations_is_refused(section: str, pattern: str) -> None:
    with pytest.raises(ValidationError) as refused:
        config(**{section: {"include": ["TEAM", pattern, "**/*"]}})  # the first one is named
    assert refused.value.errors()[0]["loc"] == (section,)
    assert refused.value.errors()[0]["msg"] == (
        f'Value error, include "{pattern}" matches every {section} key, and no rule can tell '
        "a password from a run ID by its value: write a glob with a literal part (TEAM_*, "
        '*_RUN_ID, example.com/*) or name the keys (README, "Choosing keys")'
    )


@pytest.mark.parametrize("pattern", ["TEAM_*", "*_RUN_ID", "example.com/*", "a*", "*x*", "?1"])
def test_a_glob_with_a_literal_part_is_accepted(pattern: str) -> None:
    cfg = config(env={"include": [pattern]}, annotations={"include": [pattern]})
    assert cfg.env.include == cfg.annotations.include == [pattern]


def test_include_everything_over_labels_is_warned_about_with_its_position(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    _validate_with(
        'labels: {include: [team, "*"]}\npod_labels: {include: ["**"]}\nenv: {include: ["TEAM_*"]}'
    )
    warnings = [r.getMessage() for r in caplog.records if r.name == "otelgpu.config"]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(
        'f.yaml:4:30: processors::container_env::labels::include::1: include ["*"] hands labels '
        "keys to rules: a key the include list does not name is exported only when its value "
        "is plainly safe"
    )
    assert 'otelgpu_container_env_refused_keys_total{reason="glob_..."}' in warnings[0]
    assert warnings[1].startswith(
        'f.yaml:5:28: processors::container_env::pod_labels::include::0: include ["*"]'
    )


def test_named_keys_and_narrow_globs_are_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    _validate_with('env: {include: [TEAM, "MLFLOW_*"]}\nlabels: {include: ["team*", "*team"]}')
    assert [r for r in caplog.records if r.name == "otelgpu.config"] == []
