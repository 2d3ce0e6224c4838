"""The CLI in-process: validate, components, print-config and the shipped pipelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu import cli
from otelgpu.builtins import builtin_registry
from otelgpu.config import default_pipeline_text

ROOT = Path(__file__).resolve().parents[3]
PIPELINES = sorted((ROOT / "pipelines").glob("*.yaml"))


def test_there_are_shipped_pipelines() -> None:
    assert PIPELINES, "pipelines/ holds no pipeline file"


@pytest.mark.parametrize("path", PIPELINES, ids=[p.name for p in PIPELINES])
def test_every_shipped_pipeline_validates(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K8S_NODE_NAME", "node-1")
    assert cli.main(["validate", "-c", str(path)]) == 0, capsys.readouterr().err
    assert "configuration is valid" in capsys.readouterr().out


def test_the_embedded_default_validates_and_is_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate"]) == 0, capsys.readouterr().err
    assert default_pipeline_text() == (ROOT / "pipelines" / "demo.yaml").read_text()


def test_validate_reports_errors_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("receivers:\n  nvml:\n    collection_interval: often\n")
    assert cli.main(["validate", "-c", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3:26: receivers::nvml::collection_interval: invalid duration" in err
    assert f"{bad}:1:1: service::pipelines: at least one pipeline is required" in err


def test_components_lists_every_type_with_stability(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["components"]) == 0
    out = capsys.readouterr().out
    for factory in builtin_registry():
        assert f"  {factory.type} " in out
        assert factory.stability.value in out
    assert (
        out.index("receivers:")
        < out.index("processors:")
        < out.index("exporters:")
        < out.index("extensions:")
    )


def test_print_config_expands_env_and_redacts_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTLP_TOKEN", "Bearer sup3r-s3cret")
    monkeypatch.setenv("SERIES", "3")
    config = tmp_path / "p.yaml"
    config.write_text(
        "receivers:\n  nvml: {backend: simulated, collection_interval: '${env:INTERVAL:-15s}'}\n"
        "exporters:\n  otlp:\n    endpoint: localhost:4317\n    headers: {authorization: '${env:OTLP_TOKEN}'}\n"
        "service:\n  pipelines:\n    metrics: {receivers: [nvml], exporters: [otlp]}\n"
    )
    assert cli.main(["print-config", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    assert "sup3r-s3cret" not in out
    assert "authorization: '[REDACTED]'" in out
    assert "collection_interval: 15s" in out


def test_set_overrides_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["print-config", "--set", "receivers.nvml.collection_interval=3s"]) == 0
    assert "collection_interval: 3s" in capsys.readouterr().out
