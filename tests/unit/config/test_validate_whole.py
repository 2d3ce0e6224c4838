"""Stage 4: what each component allows alone but the whole cannot do (testdata/whole, exact
errors), and the warnings `validate` prints about include lists."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otelgpu import cli
from otelgpu.component.errors import ConfigError
from otelgpu.component.registry import Registry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.service.builtins import builtin_factories, builtin_registry
from tests.components import sample_factory

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


NAMED_REFUSALS = """\
receivers:
  nvml: {backend: simulated}
processors:
  container_env:
    allow_secret_like_keys: true
    annotations:
      include: [team, kubectl.kubernetes.io/last-applied-configuration, "TE\u0410M", "*-cause"]
exporters:
  debug:
service:
  pipelines:
    metrics: {receivers: [nvml], processors: [container_env], exporters: [debug]}
"""


def test_named_keys_refused_by_their_name_are_warned_about_whatever_allow_says(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="otelgpu.config"):
        validate(load([("f.yaml", NAMED_REFUSALS)], environ={}), builtin_registry())
    warnings = [r.getMessage() for r in caplog.records if "never be exported" in r.getMessage()]
    assert warnings == [
        "f.yaml:7:23: processors::container_env::annotations::include::1: "
        '"kubectl.kubernetes.io/last-applied-configuration" will never be exported (reason '
        "spec_annotation): it carries a whole object spec, env values included",
        'f.yaml:7:73: processors::container_env::annotations::include::2: "TE\u0410M" will never '
        "be exported (reason unsafe_key): it is not plain printable ASCII (a look-alike or "
        "invisible character)",
    ]


def _expiration_error(
    sources: list[tuple[str, str]],
    overrides: tuple[str, ...] = (),
    registry: Registry | None = None,
) -> list[str]:
    """The lines of the ConfigError, or [] when the configuration is accepted."""
    try:
        validate(load(sources, list(overrides), environ={}), registry or builtin_registry())
    except ConfigError as exc:
        return str(exc).splitlines()
    return []


def test_metric_expiration_and_collection_interval_are_located_across_files_and_set() -> None:
    base = """\
receivers:
  nvml: {backend: simulated}
exporters:
  prometheus: {}
service:
  pipelines:
    metrics: {receivers: [nvml], exporters: [prometheus]}
"""
    node = "receivers:\n  nvml:\n    collection_interval: 1m\n"
    lines = _expiration_error(
        [("base.yaml", base), ("node.yaml", node)],
        ("exporters.prometheus.metric_expiration=90s",),
    )
    assert lines == [
        "--set #1:1:40: exporters::prometheus::metric_expiration: 90s is shorter than twice "
        'the collection_interval of receiver "nvml" (1m at node.yaml:3:26), which feeds this '
        'exporter in pipeline "metrics": its series would expire between two collections and '
        "vanish from /metrics; set metric_expiration to at least 2m (or collect more often)"
    ]
    assert (
        _expiration_error(
            [("base.yaml", base), ("node.yaml", node)],
            ("exporters.prometheus.metric_expiration=2m",),
        )
        == []
    )


def test_only_the_receivers_feeding_the_exporter_count() -> None:
    text = """\
receivers:
  nvml: {backend: simulated, collection_interval: 1s}
  kubelet_stats: {collection_interval: 1h}
exporters:
  prometheus: {metric_expiration: 2s}
  debug: {}
service:
  pipelines:
    metrics/gpu: {receivers: [nvml], exporters: [prometheus]}
    metrics/node: {receivers: [kubelet_stats], exporters: [debug]}
"""
    assert _expiration_error([("f.yaml", text)]) == []


def test_a_receiver_without_a_collection_interval_is_ignored() -> None:
    text = """\
receivers:
  sample: {interval: 1h}
exporters:
  prometheus: {metric_expiration: 1s}
service:
  pipelines:
    metrics: {receivers: [sample], exporters: [prometheus]}
"""
    registry = Registry([*builtin_factories(), sample_factory])
    assert _expiration_error([("f.yaml", text)], registry=registry) == []


def test_a_short_metric_expiration_is_reported_with_the_other_errors() -> None:
    text = """\
receivers:
  nvml: {backend: simulated, collection_interval: 1h, processes: maybe}
  kubelet_stats: {collection_interval: 1m}
exporters:
  prometheus: {metric_expiration: 1m}
service:
  pipelines:
    metrics: {receivers: [kubelet_stats, nvml], exporters: [prometheus]}
"""
    lines = _expiration_error([("f.yaml", text)])
    # nvml's options are refused, so its interval is unknown: kubelet_stats' is the longest
    assert lines == [
        "f.yaml:2:66: receivers::nvml::processes: expected a boolean (true or false)",
        "f.yaml:5:35: exporters::prometheus::metric_expiration: 1m is shorter than twice the "
        'collection_interval of receiver "kubelet_stats" (1m at f.yaml:3:40), which feeds this '
        'exporter in pipeline "metrics": its series would expire between two collections and '
        "vanish from /metrics; set metric_expiration to at least 2m (or collect more often)",
    ]


def test_validate_refuses_a_short_metric_expiration_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "receivers:\n  nvml: {backend: simulated, collection_interval: 30s}\n"
        "exporters:\n  prometheus: {metric_expiration: 30s}\n"
        "service:\n  pipelines:\n    metrics: {receivers: [nvml], exporters: [prometheus]}\n"
    )
    assert cli.main(["validate", "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:4:35: exporters::prometheus::metric_expiration: 30s is shorter than" in err
    assert f'receiver "nvml" (30s at {path}:2:51)' in err
