"""The CLI with dcgm-exporter's habits: its flags refused with a pointer to `migrate`, and
`validate` listing a counters CSV's rows otelgpu cannot serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.cli import main

DEFAULT_CSV = Path(__file__).parents[1] / "receivers/nvml/testdata/default-counters.csv"
PIPELINE = """\
receivers:
  nvml:
    backend: simulated
    simulated: {{gpus: 1}}
    counters_csv: {csv}
exporters:
  prometheus: {{endpoint: "127.0.0.1:0", naming: dcgm}}
service:
  pipelines:
    metrics: {{receivers: [nvml], exporters: [prometheus]}}
"""


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "-f", "x.csv"], "-f: dcgm-exporter's flag"),
        (["run", "--collectors", "x.csv", "-k"], "--collectors, -k: dcgm-exporter's flags"),
        (["validate", "--address=:9400"], "--address: dcgm-exporter's flag"),
    ],
)
def test_a_dcgm_exporter_flag_is_refused_with_the_migrate_command(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"otelgpu {argv[0]}: {named}, not otelgpu's." in err
    assert f"`otelgpu migrate dcgm-exporter {' '.join(argv[1:])}`" in err
    assert "docs/migrating-from-dcgm-exporter.md" in err


def test_a_counters_csv_given_as_the_pipeline_file_says_where_it_goes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "-c", str(DEFAULT_CSV)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{DEFAULT_CSV}:1:1: a counters CSV is not a pipeline file: name it in the nvml receiver "
        f"(receivers::nvml::counters_csv: {DEFAULT_CSV}); `otelgpu migrate dcgm-exporter -f "
        f"{DEFAULT_CSV}` writes a pipeline file that does"
    ) in err


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["run", "-c", "1000"], "-c 1000"),
        (["validate", "--config=500"], "-c 500"),
        (["run", "-c", "1000", "-f", "x.csv"], "-c 1000 -f x.csv"),
    ],
)
def test_a_collect_interval_given_as_the_pipeline_file_is_refused_with_the_migrate_command(
    argv: list[str], command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """dcgm-exporter's `-c` is its collect interval in ms: `-c 1000`, where no file 1000
    exists, is that flag, not a missing pipeline file."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    number = command.split()[1]
    assert (
        f"otelgpu {argv[0]}: -c {number}: dcgm-exporter's -c is its collect interval in"
        f" milliseconds; otelgpu's -c names the pipeline file, and there is no file {number}."
    ) in err
    assert f"`otelgpu migrate dcgm-exporter {command}`" in err
    assert "docs/migrating-from-dcgm-exporter.md" in err


def test_a_pipeline_file_named_by_a_number_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is there is the pipeline file, whatever its name looks like."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "1000").write_text(PIPELINE.format(csv=DEFAULT_CSV))
    assert main(["validate", "-c", "1000"]) == 0
    assert "configuration is valid: 1 pipeline" in capsys.readouterr().out


def test_other_unknown_arguments_stay_argparse_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--bogus"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_validate_lists_the_rows_otelgpu_cannot_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "counters.csv"
    csv.write_text(
        DEFAULT_CSV.read_text()
        + "DCGM_EXP_P2P_STATUS, counter, P2P NvLink status\n"
        + "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE, gauge, HMMA\n"
    )
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(csv=csv))
    assert main(["validate", "-c", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "configuration is valid: 1 pipeline"
    assert f'receiver "nvml": {csv}: 26 of 28 fields served, 2 not served' in out
    assert (
        f'receiver "nvml": {csv}:98: DCGM_EXP_P2P_STATUS: not served: peer-to-peer NVLink '
        "status needs DCGM"
    ) in out
    assert (
        f'receiver "nvml": {csv}:99: DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE: not served: a '
        "profiling field NVML's GPM does not give: needs DCGM"
    ) in out
    assert (
        f'receiver "nvml": {csv}:88: DCGM_FI_PROF_GR_ENGINE_ACTIVE: read through NVML GPM on '
        "Hopper and later; profiling before Hopper needs DCGM (no series there)"
    ) in out


def test_a_bad_counters_csv_fails_validate_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "counters.csv"
    csv.write_text("DCGM_FI_DEV_GPU_UTIL, gauge, util\nDCGM_FI_DEV_SM_CLOCK gauge SM clock\n")
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(csv=csv))
    assert main(["validate", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"pipeline.yaml:5:19: receivers::nvml::counters_csv: {csv}:2: expected 3 columns" in err
