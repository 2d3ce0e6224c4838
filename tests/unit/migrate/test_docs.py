"""docs/migrating-from-dcgm-exporter.md's flag and field tables are the code's."""

from __future__ import annotations

from pathlib import Path

from otelgpu.migrate.dcgm_flags import FLAGS
from otelgpu.migrate.docs import field_table, flag_table, rewrite

DOC = Path(__file__).parents[3] / "docs" / "migrating-from-dcgm-exporter.md"


def test_the_generated_tables_are_current() -> None:
    text = DOC.read_text()
    assert text == rewrite(text), (
        "docs/migrating-from-dcgm-exporter.md is stale: python -m otelgpu.migrate.docs"
    )
    assert flag_table() in text and field_table() in text


def test_the_flag_table_has_a_row_per_flag_with_the_reason_where_there_is_no_equivalent() -> None:
    rows = [line for line in flag_table().splitlines() if line.startswith("| `--")]
    assert len(rows) == len(FLAGS)
    for flag, row in zip(FLAGS, rows, strict=True):
        assert row.startswith(f"| `--{flag.name}`")
        assert (f"**none**: {flag.reason}" in row) if flag.reason else (flag.otelgpu in row)


def test_the_field_table_says_why_for_each_field_not_served() -> None:
    table = field_table()
    assert (
        "| `DCGM_EXP_P2P_STATUS` | **not served** | peer-to-peer NVLink status needs DCGM |"
        in table
    )
    assert (
        "| `DCGM_FI_DEV_GPU_UTIL` (`dcgm_gpu_utilization`) | `hw.gpu.utilization` `hw.gpu.task=general` |  |"
        in table
    )
    assert (
        "| `DCGM_FI_PROF_SM_ACTIVE` (`dcgm_fi_prof_sm_active`) | `nvidia.gpu.sm.active` | read through NVML GPM on Hopper and later; profiling before Hopper needs DCGM (no series there) |"
        in table
    )
