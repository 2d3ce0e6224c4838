"""`service::telemetry::metrics::readers`: the Collector's pull reader with a Prometheus exporter
is honoured; the rest of its reader shape gets an error that names the key and what to write
instead; a reader's port is checked against every other listener like theirs are."""

from __future__ import annotations

import pytest
import yaml

from otelgpu.component.errors import ConfigError, Issue
from otelgpu.config.loader import load
from otelgpu.config.render import render
from otelgpu.config.schema import AgentConfig, validate
from otelgpu.config.telemetry_readers import PrometheusPullConfig, PullExporterConfig
from otelgpu.service.builtins import builtin_registry

PIPELINE = """\
receivers:
  nvml: {backend: simulated}
exporters:
  prometheus: {endpoint: "0.0.0.0:9400"}
extensions:
  health_check: {endpoint: "localhost:13133"}
service:
  extensions: [health_check]
  pipelines:
    metrics: {receivers: [nvml], exporters: [prometheus]}
"""
PORT = ("service", "telemetry", "metrics", "readers", 0, "pull", "exporter", "prometheus", "port")


def _validate(readers: str) -> AgentConfig:
    text = f"service:\n  telemetry:\n    metrics:\n      readers: {readers}\n"
    return validate(load([("p.yaml", PIPELINE), ("r.yaml", text)], environ={}), builtin_registry())


def _issues(readers: str) -> list[Issue]:
    with pytest.raises(ConfigError) as info:
        _validate(readers)
    return info.value.issues


def _reader(options: str) -> str:
    return f"[{{pull: {{exporter: {{prometheus: {{{options}}}}}}}}}]"


def test_the_collectors_pull_reader_is_honoured_and_printed() -> None:
    config = _validate(_reader("host: 0.0.0.0, port: 8888"))
    (reader,) = config.telemetry.metrics.readers
    assert reader.pull.exporter.prometheus.address == ("0.0.0.0", 8888)
    collector_habits = (
        "host: '[::1]', port: 8888, without_scope_info: true, without_units: false, "
        "without_type_suffix: false, translation_strategy: UnderscoreEscapingWithSuffixes"
    )
    (reader,) = _validate(_reader(collector_habits)).telemetry.metrics.readers
    assert reader.pull.exporter.prometheus.address == ("::1", 8888)
    assert reader.pull.exporter.prometheus.endpoint == "[::1]:8888"
    (reader,) = _validate(_reader("port: 0")).telemetry.metrics.readers
    assert reader.pull.exporter.prometheus.address == ("localhost", 0)  # the Collector's host
    printed = yaml.safe_load(render(config))["service"]["telemetry"]["metrics"]["readers"]
    assert printed[0]["pull"]["exporter"]["prometheus"]["port"] == 8888
    assert _validate("[]").telemetry.metrics.readers == []


def test_print_config_shows_the_honoured_values_of_a_reader_that_names_none() -> None:
    config = _validate(_reader("port: 8888"))
    printed = yaml.safe_load(render(config))["service"]["telemetry"]["metrics"]["readers"]
    assert printed[0]["pull"]["exporter"]["prometheus"] == {
        "host": "localhost",
        "port": 8888,
        "without_units": False,
        "without_type_suffix": False,
        "without_scope_info": True,
        "translation_strategy": "UnderscoreEscapingWithSuffixes",
    }


def test_an_ipv4_or_named_host_is_not_bracketed() -> None:
    assert PrometheusPullConfig(host="0.0.0.0", port=8888).endpoint == "0.0.0.0:8888"
    assert PrometheusPullConfig(port=8888).endpoint == "localhost:8888"
    assert PrometheusPullConfig(host="::", port=8888).endpoint == "[::]:8888"


def test_a_config_built_in_code_keeps_its_exporter() -> None:
    exporter = PrometheusPullConfig(port=8888)
    assert PullExporterConfig(prometheus=exporter).prometheus == exporter


@pytest.mark.parametrize(
    ("readers", "message"),
    [
        (
            "[{periodic: {exporter: {otlp: {protocol: grpc, endpoint: 'http://gw:4317'}}}}]",
            "periodic (a Collector reader) is not supported here: to push the agent's own "
            "metrics, list a configured exporter (an otlp exporter, say) in "
            "service::telemetry::metrics::exporters (every interval)",
        ),
        (
            "[{pull: {exporter: {otlp: {}}}}]",
            "otlp: only a prometheus exporter can be pulled from here; to push",
        ),
        (
            _reader("port: 8888, without_units: true"),
            "without_units: true is not supported here: the unit suffixes (_seconds) stay",
        ),
        (
            _reader("port: 8888, without_type_suffix: true"),
            "without_type_suffix: true is not supported here: the counter suffix (_total) stays",
        ),
        (
            _reader("port: 8888, without_scope_info: false"),
            "without_scope_info: false is not supported here: the agent's own series carry no "
            "scope labels",
        ),
        (
            _reader("port: 8888, translation_strategy: NoTranslation"),
            "translation_strategy: 'NoTranslation' is not supported here",
        ),
        (
            _reader("port: 8888, with_resource_constant_labels: {included: ['*']}"),
            "with_resource_constant_labels (a Collector option) is not supported here",
        ),
        (_reader("host: 0.0.0.0"), "required key is missing"),
        (_reader("port: 70000"), "at most 65535"),
        (_reader("port: -1"), "must be at least 0"),
        (
            "[{pull: {exporter: {prometheus: 8888}}}]",
            "expected a mapping of options (host, port, translation_strategy,",
        ),
        (_reader("port: 8888, path: /own"), "unknown key (valid keys: host, port,"),
    ],
)
def test_the_rest_of_the_reader_shape_is_refused_by_name(readers: str, message: str) -> None:
    (issue,) = _issues(readers)
    assert message in issue.message
    assert issue.path[:5] == ("service", "telemetry", "metrics", "readers", 0)


KEEP_NAMES = "the shipped alerts and dashboards read the agent's own series by these names"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            "without_units: true",
            f"without_units: true is not supported here: the unit suffixes (_seconds) stay: "
            f"{KEEP_NAMES}",
        ),
        (
            "without_type_suffix: true",
            f"without_type_suffix: true is not supported here: the counter suffix (_total) "
            f"stays: {KEEP_NAMES}",
        ),
        (
            "translation_strategy: NoTranslation",
            "translation_strategy: 'NoTranslation' is not supported here: names are served as "
            f"declared, with their suffixes: {KEEP_NAMES}",
        ),
        (
            "with_resource_constant_labels: {included: ['*']}",
            "with_resource_constant_labels (a Collector option) is not supported here: the "
            "agent's own series carry no resource labels; the scrape's target labels say which "
            "agent they come from",
        ),
    ],
)
def test_a_refusal_says_all_of_why(options: str, message: str) -> None:
    (issue,) = _issues(_reader(f"port: 8888, {options}"))
    assert message in issue.message


def test_every_refused_option_is_named_in_one_issue() -> None:
    (issue,) = _issues(_reader("port: 8888, without_units: true, without_type_suffix: true"))
    assert "stay: " + KEEP_NAMES + "; without_type_suffix: true is not" in issue.message


def test_every_other_pull_exporter_is_named() -> None:
    (issue,) = _issues("[{pull: {exporter: {otlp: {}, jaeger: {}, prometheus: {port: 1}}}}]")
    assert "jaeger, otlp: only a prometheus exporter can be pulled from here" in issue.message


def test_a_reader_on_a_port_another_listener_has_is_reported_by_validate() -> None:
    (issue,) = _issues(_reader("host: 127.0.0.1, port: 9400"))  # the exporter has every address
    assert issue.path == PORT and issue.file == "r.yaml"
    assert issue.message.startswith('port 9400 is already listened on by exporter "prometheus"')
    (issue,) = _issues(_reader("host: 0.0.0.0, port: 13133"))  # every address: health_check's too
    assert 'already listened on by extension "health_check" (p.yaml:' in issue.message
    two = "[{pull: {exporter: {prometheus: {port: 8888}}}}, {pull: {exporter: {prometheus: {port: 8888}}}}]"
    (issue,) = _issues(two)
    assert issue.path == (*PORT[:4], 1, *PORT[5:])
    assert issue.message.startswith("port 8888 is already listened on by the telemetry reader")
    # Another port, another address of the same port, or any free port: no conflict.
    _validate(_reader("host: 0.0.0.0, port: 8888"))
    _validate(_reader("host: 127.0.0.2, port: 13133"))
    _validate(
        "[{pull: {exporter: {prometheus: {port: 0}}}}, {pull: {exporter: {prometheus: {port: 0}}}}]"
    )
