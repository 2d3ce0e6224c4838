"""The CLI in-process: validate, components, print-config and the shipped pipelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu import cli
from otelgpu.config import default_pipeline_text
from otelgpu.service.builtins import builtin_registry

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
    lines = out.splitlines()
    for factory in builtin_registry():
        (line,) = [x for x in lines if x.split()[:1] == [factory.type]]
        _, stability, description = line.split(maxsplit=2)
        assert stability == factory.stability.value
        # what the component does, in words (not blank, not its type again)
        assert description == factory.description and len(description.split()) >= 4
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


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from otelgpu import __version__

    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"otelgpu {__version__}"


UNUSED = """\
receivers:
  nvml: {backend: simulated}
exporters:
  debug:
  debug/unused:
service:
  telemetry:
    logs: {level: WARNING, encoding: json}
  pipelines:
    metrics: {receivers: [nvml], exporters: [debug]}
"""


def test_load_warnings_come_out_in_the_configured_encoding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The config says JSON: the warning logged while loading it is JSON too, with a
    millisecond UTC timestamp and the level name `warn`."""
    import json
    import re

    path = tmp_path / "p.yaml"
    path.write_text(UNUSED)
    assert cli.main(["validate", "-c", str(path)]) == 0
    lines = capsys.readouterr().err.splitlines()
    records = [json.loads(line) for line in lines]  # every line is JSON
    assert [r["msg"] for r in records] == [
        f"{path}:5:3: exporters::debug/unused: configured but not used by any pipeline"
    ]
    assert records[0]["level"] == "warn"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", records[0]["ts"])


def test_log_flags_override_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(UNUSED)
    argv = ["validate", "-c", str(path), "--log-format", "console", "--log-level", "ERROR"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().err == ""  # the warning is below --log-level error
    assert cli.main(["validate", "-c", str(path), "--log-format", "console"]) == 0
    err = capsys.readouterr().err
    assert f"WARNING otelgpu.config: {path}:5:3: exporters::debug/unused" in err
    assert not err.startswith("{")
    assert cli.main(["print-config", "-c", str(path), "--log-level", "warn"]) == 0
    assert "level: warn\n" in capsys.readouterr().out  # the flag is what runs


def test_log_level_accepts_the_names_the_config_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.yaml"
    for level in ("warn", "warning", "WARN", "Error", "debug"):
        path.write_text(UNUSED.replace("WARNING", level))
        assert cli.main(["validate", "-c", str(path), "--log-level", level]) == 0, level
    capsys.readouterr()


def test_run_names_the_cpu_limit_it_runs_under(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CFS quota stalls the thread serving /metrics too: the start-up log says there is one."""

    class Ran:  # what the agent does once started is not what this checks
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        async def run(self, config: object) -> None:
            return None

    monkeypatch.setattr(cli, "Agent", Ran)
    monkeypatch.setattr(cli, "cpu_limit", lambda: 0.2)
    assert cli.main(["run"]) == 0
    assert "running under a CPU limit of 0.20 cores" in capsys.readouterr().err
    monkeypatch.setattr(cli, "cpu_limit", lambda: None)
    assert cli.main(["run"]) == 0
    assert "CPU limit" not in capsys.readouterr().err
