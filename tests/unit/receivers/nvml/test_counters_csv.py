"""`counters_csv`: dcgm-exporter's counters file read as is, and exactly its fields emitted."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from otelgpu.receivers.nvml import counters_csv
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.counters_select import NOT_SERVED, SERVED, select, verdict
from otelgpu.receivers.nvml.dcgm_names import NAMING
from tests.unit.receivers.nvml.conftest import MakeReceiver, by_id, metrics

TESTDATA = Path(__file__).parent / "testdata"
DEFAULT_CSV = TESTDATA / "default-counters.csv"
LEGACY_CSV = TESTDATA / "1.x-compatibility-metrics.csv"
# The fields dcgm-exporter's etc/default-counters.csv collects (its uncommented rows).
DEFAULT_FIELDS = {
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DRIVER_VERSION", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
}  # fmt: skip


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "counters.csv"
    path.write_text(text)
    return str(path)


def test_the_default_counters_file_reads_row_for_row() -> None:
    rows = counters_csv.read(str(DEFAULT_CSV))
    assert {r.field for r in rows} == DEFAULT_FIELDS
    assert len(rows) == len(DEFAULT_FIELDS)  # commented rows are comments
    dec = next(r for r in rows if r.field == "DCGM_FI_DEV_DEC_UTIL")  # `DEC_UTIL ,` trimmed
    assert (dec.name, dec.type, dec.help) == (
        "DCGM_FI_DEV_DEC_UTIL",
        "gauge",
        "Decoder utilization (in %).",
    )
    assert all(
        r.line > 0 and DEFAULT_CSV.read_text().splitlines()[r.line - 1].lstrip().startswith(r.name)
        for r in rows
    )


def test_a_quoted_help_holds_commas_and_indented_comments_are_comments(tmp_path: Path) -> None:
    text = '  # an indented comment\n\nDCGM_FI_DEV_GPU_UTIL, gauge, "busy, in %"\n'
    (row,) = counters_csv.read(write(tmp_path, text))
    assert (row.line, row.field, row.help) == (3, "DCGM_FI_DEV_GPU_UTIL", "busy, in %")


def test_the_1x_file_reads_its_names_as_dcgm_fields() -> None:
    rows = counters_csv.read(str(LEGACY_CSV))
    assert rows[0].name == "dcgm_sm_clock" and rows[0].field == "DCGM_FI_DEV_SM_CLOCK"
    fields = {r.field for r in rows}
    assert "DCGM_FI_PROF_DRAM_ACTIVE" in fields and "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" in fields
    assert all(verdict(f).served for f in fields)  # every 1.x field is served, renamed


def test_every_1x_name_stands_for_a_field_otelgpu_judges() -> None:
    for name, field in counters_csv.LEGACY_NAMES.items():
        assert counters_csv.field_of(name) == field
        v = verdict(field)
        assert v.served or field in NOT_SERVED, name


def test_every_bad_line_is_named_with_its_line(tmp_path: Path) -> None:
    text = (
        "DCGM_FI_DEV_GPU_UTIL, gauge\n"  # 2 columns
        "DCGM_FI_DEV_SM_CLOCK, gauges, SM clock\n"  # no such type
        "# fine\n"
        "GPU_UTIL, gauge, not a field\n"
        "DCGM_EXP_NOT_A_THING, counter, unknown exporter field\n"
        "DCGM_FI_DEV_FB_FREE, gauge, fine\n"
    )
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as caught:
        counters_csv.read(path)
    message = str(caught.value)
    assert f"{path}:1: expected 3 columns (field, Prometheus type, help), found 2" in message
    assert f"{path}:2: unknown Prometheus type 'gauges' (valid: gauge, counter," in message
    assert f"{path}:4: 'GPU_UTIL' is not a DCGM field (DCGM_FI_*)" in message
    assert f"{path}:5: 'DCGM_EXP_NOT_A_THING' is not a DCGM field" in message
    assert f"{path}:6" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# only comments\n\n", r"lists no field \(every line is blank or a comment\)"),
        ('DCGM_FI_DEV_GPU_UTIL, gauge, "unterminated\n', "unexpected end of data"),
    ],
)
def test_an_empty_or_broken_file_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        counters_csv.read(write(tmp_path, text))


def test_a_missing_huge_or_binary_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot read .*nope\.csv: No such file"):
        counters_csv.read(str(tmp_path / "nope.csv"))
    huge = tmp_path / "huge.csv"
    huge.write_bytes(b"#" * (counters_csv.MAX_BYTES + 1))
    with pytest.raises(ValueError, match="larger than 1048576 bytes"):
        counters_csv.read(str(huge))
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"DCGM_FI_DEV_GPU_UTIL, gauge, \xff\n")
    with pytest.raises(ValueError, match=r"not UTF-8 text \(byte 29\)"):
        counters_csv.read(str(binary))


def test_every_field_the_dcgm_naming_renders_is_served_by_its_metric() -> None:
    for metric, names in NAMING.dcgm.items():
        fields = [f.name for f in names.splits.values()] if names.split_by else [names.field.name]  # type: ignore[union-attr]
        for field in fields:
            assert SERVED[field].metric == metric


def test_rows_otelgpu_cannot_serve_say_why(tmp_path: Path) -> None:
    text = (
        "DCGM_FI_DEV_GPU_UTIL, gauge, util\n"
        "DCGM_EXP_P2P_STATUS, counter, p2p\n"
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0, counter, link 0\n"
        "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE, gauge, imma\n"
        "DCGM_FI_PROF_SM_ACTIVE, gauge, sm\n"
        "DCGM_FI_DEV_SOMETHING_NEW, gauge, new\n"
    )
    path = write(tmp_path, text)
    selection = select(path, counters_csv.read(path))
    assert selection.summary() == f"{path}: 2 of 6 fields served, 4 not served"
    assert selection.unserved() == (
        f"{path}:2: DCGM_EXP_P2P_STATUS: not served: peer-to-peer NVLink status needs DCGM",
        f"{path}:3: DCGM_FI_DEV_NVLINK_BANDWIDTH_L0: not served: NVML has no per-link byte "
        "counter; per-link errors and state are nvidia.gpu.nvlink.link.errors and "
        "nvidia.gpu.nvlink.state",
        f"{path}:4: DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE: not served: a profiling field NVML's "
        "GPM does not give: needs DCGM",
        f"{path}:6: DCGM_FI_DEV_SOMETHING_NEW: not served: otelgpu has no NVML reading for this "
        "DCGM field",
    )
    assert (
        f"{path}:5: DCGM_FI_PROF_SM_ACTIVE: read through NVML GPM on Hopper and later; "
        "profiling before Hopper needs DCGM (no series there)" in selection.notes()
    )
    assert selection.metrics == {"hw.gpu.utilization", "nvidia.gpu.sm.active"}


def test_the_csv_replaces_the_metric_set_and_metrics_switch_on_top(tmp_path: Path) -> None:
    path = write(tmp_path, "DCGM_FI_DEV_GPU_UTIL, gauge, util\nDCGM_FI_DEV_FB_USED, gauge, used\n")
    config = NvmlReceiverConfig.model_validate(
        {"counters_csv": path, "metrics": {"nvidia.gpu.up": {"enabled": True}}}
    )
    assert config.enabled_metrics() == {
        "hw.gpu.utilization",
        "hw.gpu.memory.usage",
        "nvidia.gpu.up",
    }
    assert config.kept_points() == {"hw.gpu.utilization": ("hw.gpu.task", frozenset({"general"}))}
    switched = NvmlReceiverConfig.model_validate(
        {"counters_csv": path, "metrics": {"hw.gpu.utilization": {"enabled": True}}}
    )
    assert switched.kept_points() == {}  # switched on by name: every point of it
    with pytest.raises(
        ValidationError, match="counters_csv and metric_set both choose the metrics"
    ):
        NvmlReceiverConfig.model_validate({"counters_csv": path, "metric_set": "all"})


def test_a_bad_csv_is_a_config_error_naming_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "DCGM_FI_DEV_GPU_UTIL, gauge\n")
    with pytest.raises(ValidationError, match=rf"{path}:1: expected 3 columns"):
        NvmlReceiverConfig.model_validate({"counters_csv": path})


async def test_only_the_listed_fields_of_a_split_metric_are_emitted(
    make_receiver: MakeReceiver, tmp_path: Path
) -> None:
    path = write(tmp_path, "DCGM_FI_DEV_GPU_UTIL, gauge, util\nDCGM_FI_DEV_MEMORY_TEMP, gauge, t\n")
    receiver = make_receiver(counters_csv=path)
    (gpu,) = by_id(await receiver.scrape()).values()
    found = metrics(gpu)
    assert set(found) == {"hw.gpu.utilization", "hw.temperature"}
    assert [p.attributes["hw.gpu.task"] for p in found["hw.gpu.utilization"].points] == ["general"]
    assert [p.attributes["hw.sensor_location"] for p in found["hw.temperature"].points] == [
        "memory"
    ]
