"""Stage 4: what each component allows alone but the whole cannot do (testdata/whole, exact
errors), and the warnings `validate` prints about include lists."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otelgpu.builtins import builtin_registry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.errors import ConfigError

CASES = sorted((Path(__file__).parent / "testdata" / "whole").glob("*.yaml"))


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_whole_config_errors(case: Path) -> None:
    text = case.read_text()
    expected = [x.removeprefix("# expect: ") for x in text.splitlines() if x.startswith("# exp")]
    with pytest.raises(ConfigError) as info:
        validate(load([(case.name, text)], environ={}), builtin_registry())
    assert str(info.value).splitlines() == expected


def test_a_port_conflict_is_reported_with_the_other_errors() -> None:
    text = """\
receivers:
  nvml: {backend: simulated, collection_interval: soon}
exporters:
  prometheus: {endpoint: "0.0.0.0:9400"}
extensions:
  health_check: {endpoint: "0.0.0.0:9400"}
service:
  extensions: [health_check]
  pipelines:
    metrics: {receivers: [nvml], exporters: [prometheus]}
"""
    with pytest.raises(ConfigError) as info:
        validate(load([("f.yaml", text)], environ={}), builtin_registry())
    lines = str(info.value).splitlines()
    assert lines[0].startswith("f.yaml:2:51: receivers::nvml::collection_interval: invalid")
    assert lines[1].startswith("f.yaml:6:28: extensions::health_check::endpoint: port 9400 is")
    assert len(lines) == 2


CONTAINER_ENV = """\
receivers:
  nvml: {backend: simulated}
processors:
  container_env:
    env:
      include: [TEAM, DB_PASSWORD, "*_TOKEN", MLFLOW_RUN_ID]
    labels:
      include: [team]
  container_env/allowed:
    allow_secret_like_keys: true
    env:
      include: [AWS_SECRET_ACCESS_KEY]
exporters:
  debug:
service:
  pipelines:
    metrics:
      receivers: [nvml]
      processors: [container_env, container_env/allowed]
      exporters: [debug]
"""


def test_secret_like_include_keys_are_warned_about_with_their_position(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="otelgpu.config"):
        validate(load([("f.yaml", CONTAINER_ENV)], environ={}), builtin_registry())
    warnings = [r.getMessage() for r in caplog.records if "looks like the key" in r.getMessage()]
    assert warnings == [
        'f.yaml:6:23: processors::container_env::env::include::1: "DB_PASSWORD" looks like the '
        "key of a secret; it will not be exported unless allow_secret_like_keys is true",
        'f.yaml:6:36: processors::container_env::env::include::2: "*_TOKEN" looks like the key '
        "of a secret; it will not be exported unless allow_secret_like_keys is true",
        'f.yaml:12:17: processors::container_env/allowed::env::include::0: "AWS_SECRET_ACCESS_KEY"'
        " looks like the key of a secret; it will be exported (allow_secret_like_keys: true)",
    ]
