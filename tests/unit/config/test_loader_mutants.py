"""Which source validate names when something is wrong: a `--set` override, or the embedded
default pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu import cli
from otelgpu.config import default_pipeline_text
from tests.unit.config.pipelines import MINIMAL


def _validate(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["validate", *args])
    return code, capsys.readouterr().err


def test_an_unknown_key_given_by_set_points_at_the_start_of_the_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(MINIMAL)
    code, err = _validate(["-c", str(path), "--set", "receivers.nvml.bogus=1"], capsys)
    assert code == 2
    assert err.splitlines()[1].startswith("--set #1:1:1: receivers::nvml::bogus: unknown key")


def test_an_error_in_the_embedded_default_names_it_as_the_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTELGPU_DEMO_ENDPOINT", "nowhere")
    code, err = _validate([], capsys)
    assert code == 2
    lines = default_pipeline_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "OTELGPU_DEMO_ENDPOINT" in text)
    column = lines[line - 1].index("$") + 1
    assert err.splitlines()[1] == (
        f"<embedded default pipeline>:{line}:{column}: exporters::prometheus::endpoint: "
        'invalid endpoint "nowhere": expected host:port, such as 0.0.0.0:9400'
    )
