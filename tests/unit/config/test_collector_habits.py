"""What a Collector user writes out of habit: each gets its meaning here or one error that says
what to write instead (docs/configuration.md, "Collector users")."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.errors import ConfigError
from otelgpu.config import load_config
from otelgpu.config.loader import load, read_files
from otelgpu.config.schema import validate
from otelgpu.service.builtins import builtin_registry
from tests.unit.config.pipelines import MINIMAL


def _issues(*texts: str) -> list[str]:
    raw = load([(f"f{n}.yaml", t) for n, t in enumerate(texts)], environ={})
    with pytest.raises(ConfigError) as info:
        validate(raw, builtin_registry())
    return [i.message for i in info.value.issues]


def test_a_contrib_k8s_attributes_block_gets_one_error_naming_its_options() -> None:
    contrib = """
processors:
  k8s_attributes:
    auth_type: serviceAccount
    passthrough: false
    extract: {metadata: [k8s.pod.name]}
    pod_association: [{sources: [{from: connection}]}]
service:
  pipelines:
    metrics: {processors: [k8s_attributes]}
"""
    (message,) = _issues(MINIMAL, contrib)
    assert message.startswith("auth_type, extract, passthrough, pod_association: options of the")
    assert "pod_resources_socket" in message and "container_env" in message


def test_kubeletstats_is_kubelet_stats_with_a_deprecation_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = """
receivers:
  kubeletstats: {collection_interval: 20s}
exporters:
  debug: {}
service:
  pipelines:
    metrics: {receivers: [kubeletstats], exporters: [debug]}
"""
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    config = validate(load([("k.yaml", text)], environ={}), builtin_registry())
    (cid,) = config.components[Kind.RECEIVER]
    assert str(cid) == "kubeletstats"
    assert type(config.components[Kind.RECEIVER][cid]).__name__ == "KubeletStatsReceiverConfig"
    warnings = [r.getMessage() for r in caplog.records]
    assert any(
        '"kubeletstats" is a deprecated alias' in w and "kubelet_stats" in w for w in warnings
    )
    # the config loader's logger, which log lines name and `validate` warnings come from
    assert {r.name for r in caplog.records} == {"otelgpu.config"}


def test_service_telemetry_takes_the_collector_keys_it_can_honour_and_names_the_rest() -> None:
    honoured = """
service:
  telemetry:
    logs: {level: WARN, encoding: json}
    metrics: {level: detailed}
"""
    config = validate(load([("a", MINIMAL), ("b", honoured)], environ={}), builtin_registry())
    assert config.telemetry.logs.level == "warn" and config.telemetry.metrics.level == "detailed"
    rest = """
service:
  telemetry:
    resource: {service.name: gpu}
    logs: {output_paths: [stdout]}
    metrics:
      address: 0.0.0.0:8888
"""
    (message,) = _issues(MINIMAL, rest)
    for key in ("resource", "logs::output_paths", "metrics::address"):
        assert f"{key} (a Collector option) is not supported here" in message
    (none,) = _issues(MINIMAL, "service: {telemetry: {metrics: {level: none}}}")
    assert none.startswith("level: none is not supported")


def test_config_sources_may_be_written_as_collector_uris(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(MINIMAL)
    overlay = "yaml:exporters::debug::verbosity: detailed"
    config = load_config([f"file:{path}", overlay], builtin_registry(), environ={})
    (debug,) = config.components[Kind.EXPORTER].values()
    assert getattr(debug, "verbosity", None) == "detailed"
    with pytest.raises(ConfigError) as info:
        read_files(["env:OTELGPU_CONFIG"])
    assert "the env: config source is not supported here" in info.value.issues[0].message


@pytest.mark.parametrize(("scalar", "read_as"), [("on", "true"), ("0123", "83")])
def test_a_yaml_1_1_scalar_gets_a_hint_to_quote_it(scalar: str, read_as: str) -> None:
    text = f"""
processors:
  container_env:
    runtime: docker
    env: {{include: [{scalar}]}}
service:
  pipelines:
    metrics: {{processors: [container_env]}}
"""
    (message,) = _issues(MINIMAL, text)
    assert message.startswith("expected a string; ")
    assert f"YAML read the value as {read_as}: quote it" in message


def test_exporter_options_of_the_collector_get_a_targeted_error_or_their_meaning() -> None:
    text = """
exporters:
  otlp_http: {endpoint: "http://gateway:4318", encoding: json}
  otlp_http/proto: {endpoint: "http://gateway:4318", encoding: proto}
  prometheus: {endpoint: "0.0.0.0:9400", resource_constant_labels: [k8s.pod.name]}
service:
  pipelines:
    metrics: {exporters: [otlp_http, otlp_http/proto, prometheus]}
"""
    messages = _issues(MINIMAL, text)
    assert len(messages) == 2, messages
    assert any(m.startswith('encoding: "json" is not supported') for m in messages)
    assert any(m.startswith("resource_constant_labels (a Collector option)") for m in messages)
