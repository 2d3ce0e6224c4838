"""The `service` section's models (otelgpu/config/service_section.py): every telemetry key of the
Collector that has no equivalent here is refused with what to do instead, and the defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu import cli
from otelgpu.component.errors import ConfigError
from otelgpu.config import load_config
from otelgpu.config.service_section import LogsConfig, MetricsTelemetryConfig
from otelgpu.service.builtins import builtin_registry
from tests.unit.config.pipelines import MINIMAL, refusals

# The Collector's `service::telemetry` keys (its telemetry config, v0.1xx) that the agent has
# no equivalent for: (where, key, a value of the right shape).
COLLECTOR_KEYS = [
    ("logs", "output_paths", "[stdout]"),
    ("logs", "error_output_paths", "[stderr]"),
    ("logs", "development", "true"),
    ("logs", "sampling", "{enabled: false}"),
    ("logs", "disable_caller", "true"),
    ("logs", "disable_stacktrace", "true"),
    ("logs", "initial_fields", "{team: ml}"),
    ("logs", "processors", "[]"),
    ("metrics", "address", "0.0.0.0:8888"),
    ("metrics", "views", "[]"),
    ("", "resource", "{service.name: gpu}"),
    ("", "traces", "{level: none}"),
]


@pytest.mark.parametrize(("where", "key", "value"), COLLECTOR_KEYS)
def test_each_collector_only_telemetry_key_is_refused_with_what_to_do(
    where: str, key: str, value: str
) -> None:
    nested = f"{where}: {{{key}: {value}}}" if where else f"{key}: {value}"
    lines = refusals(MINIMAL, f"service:\n  telemetry: {{{nested}}}\n")
    prefix = f"{where}::{key}" if where else key
    found = [
        line for line in lines if f"{prefix} (a Collector option) is not supported here: " in line
    ]
    assert len(found) == 1, lines
    reason = found[0].split("is not supported here: ", 1)[1]
    assert len(reason) >= 20, reason  # says why, or what to write instead


def test_every_collector_only_key_of_one_file_is_named_in_one_message() -> None:
    text = """
service:
  telemetry:
    resource: {service.name: gpu}
    logs: {development: true, sampling: {enabled: false}}
    metrics: {views: []}
"""
    (line,) = refusals(MINIMAL, text)
    for key in ("resource", "logs::development", "logs::sampling", "metrics::views"):
        assert f"{key} (a Collector option)" in line
    # one after the other, each with its why
    assert "; logs::development (a Collector option)" in line


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return str(path)


def test_a_collector_telemetry_resource_says_what_the_agent_attaches(tmp_path: Path) -> None:
    text = MINIMAL + "  telemetry:\n    resource: {service.name: gpu-agent}\n"
    with pytest.raises(ConfigError) as info:
        load_config([_write(tmp_path, text)], builtin_registry())
    (issue,) = info.value.issues
    assert issue.path == ("service", "telemetry")
    assert issue.message == (
        "resource (a Collector option) is not supported here: "
        "the agent's own metrics carry service.name, version and instance id"
    )


def test_validate_logs_a_deprecated_collector_name_as_the_config_logger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = MINIMAL.replace(
        "  debug:\n", "  debug:\n  otlphttp: {endpoint: http://localhost:4318}\n"
    ).replace("exporters: [debug]", "exporters: [debug, otlphttp]")
    assert cli.main(["validate", "-c", _write(tmp_path, text)]) == 0
    err = capsys.readouterr().err
    assert (
        ' exporters::otlphttp: "otlphttp" is a deprecated alias '
        '(as in the Collector); use "otlp_http" instead'
    ) in err
    assert " otelgpu.config: " in err


def test_the_telemetry_defaults() -> None:
    logs, metrics = LogsConfig(), MetricsTelemetryConfig()
    assert (logs.level, logs.encoding) == ("info", "console")
    assert (metrics.interval, metrics.level, metrics.exporters, metrics.readers) == (
        10.0,
        "normal",
        [],
        [],
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "service:\n  telemetry:\n    metrics:\n      exporters: [nope]\n",
            "f.yaml:4:19: service::telemetry::metrics::exporters::0: references exporter "
            '"nope" which is not configured (configured exporters: debug)',
        ),
        (
            "service:\n  pipelines: [a]\n",
            "f.yaml:2:14: service::pipelines: expected a mapping of pipeline ids",
        ),
    ],
)
def test_a_service_mistake_is_named_by_its_path_and_position(text: str, line: str) -> None:
    base = MINIMAL if "telemetry" in text else ""
    assert refusals(base, text) == [line]
