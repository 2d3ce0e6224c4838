"""The service section's checks as validate reports them: Collector-only telemetry options and
the log line a deprecated Collector name gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu import cli
from otelgpu.component.errors import ConfigError
from otelgpu.config import load_config
from otelgpu.service.builtins import builtin_registry
from tests.unit.config.pipelines import MINIMAL


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
