"""`service::telemetry::metrics::readers` at the corners mutation testing showed no test held
(docs/dev/mutation.md): the whole of each refusal's reason, several refusals at once, the
honoured values as print-config shows them, and an IPv4 reader's endpoint."""

from __future__ import annotations

import pytest
import yaml

from otelgpu.config.render import render
from otelgpu.config.telemetry_readers import PrometheusPullConfig, PullExporterConfig
from tests.unit.config.test_telemetry_readers import _issues, _reader, _validate

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
