"""dcgm-exporter's counters CSV (`-f counters.csv`), read as that exporter reads it.

The format (facts from NVIDIA/dcgm-exporter `etc/default-counters.csv` and its reader): one row
per field, three comma-separated columns `FIELD, PROMETHEUS TYPE, HELP`; a line whose first
non-blank character is `#` is a comment; blank lines are skipped; spaces around a column are
trimmed (`DCGM_FI_DEV_DEC_UTIL ,` is `DCGM_FI_DEV_DEC_UTIL`); a column may be double-quoted to
hold a comma. FIELD is a DCGM field (`DCGM_FI_*`), one of the exporter's own
(`DCGM_EXP_*`), or a 1.x name (`dcgm_sm_clock`, its `etc/1.x-compatibility-metrics.csv`, each
the lower-case alias of a DCGM field). The type is `gauge`, `counter`, `histogram`, `summary`
or `label` (a static field shown as a label on the other series). The help column is
documentation; otelgpu keeps its own HELP texts.

What the rows select is `counters_select.py`'s business; this module only reads.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass

# Larger than any real counters file (dcgm-exporter's fullest is ~6 KiB) by far: a bound, so a
# wrong path (a log file, a device) is refused instead of read into memory.
MAX_BYTES = 1 << 20
PROMETHEUS_TYPES = ("gauge", "counter", "histogram", "summary", "label")
_DCGM_FIELD = re.compile(r"DCGM_FI_[A-Z0-9_]+")
EXPORTER_FIELDS = (
    "DCGM_EXP_CLOCK_EVENTS_COUNT",
    "DCGM_EXP_XID_ERRORS_COUNT",
    "DCGM_EXP_GPU_HEALTH_STATUS",
    "DCGM_EXP_P2P_STATUS",
)
# dcgm-exporter 1.x names (go-dcgm's legacy field table): the DCGM field each stands for.
LEGACY_NAMES: Mapping[str, str] = {
    "dcgm_sm_clock": "DCGM_FI_DEV_SM_CLOCK",
    "dcgm_memory_clock": "DCGM_FI_DEV_MEM_CLOCK",
    "dcgm_memory_temp": "DCGM_FI_DEV_MEMORY_TEMP",
    "dcgm_gpu_temp": "DCGM_FI_DEV_GPU_TEMP",
    "dcgm_power_usage": "DCGM_FI_DEV_POWER_USAGE",
    "dcgm_total_energy_consumption": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "dcgm_pcie_tx_throughput": "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    "dcgm_pcie_rx_throughput": "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
    "dcgm_pcie_replay_counter": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "dcgm_gpu_utilization": "DCGM_FI_DEV_GPU_UTIL",
    "dcgm_mem_copy_utilization": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "dcgm_enc_utilization": "DCGM_FI_DEV_ENC_UTIL",
    "dcgm_dec_utilization": "DCGM_FI_DEV_DEC_UTIL",
    "dcgm_xid_errors": "DCGM_FI_DEV_XID_ERRORS",
    "dcgm_power_violation": "DCGM_FI_DEV_POWER_VIOLATION",
    "dcgm_thermal_violation": "DCGM_FI_DEV_THERMAL_VIOLATION",
    "dcgm_sync_boost_violation": "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
    "dcgm_board_limit_violation": "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
    "dcgm_low_util_violation": "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
    "dcgm_reliability_violation": "DCGM_FI_DEV_RELIABILITY_VIOLATION",
    "dcgm_fb_free": "DCGM_FI_DEV_FB_FREE",
    "dcgm_fb_used": "DCGM_FI_DEV_FB_USED",
    "dcgm_ecc_sbe_volatile_total": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "dcgm_ecc_dbe_volatile_total": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "dcgm_ecc_sbe_aggregate_total": "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "dcgm_ecc_dbe_aggregate_total": "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "dcgm_retired_pages_sbe": "DCGM_FI_DEV_RETIRED_SBE",
    "dcgm_retired_pages_dbe": "DCGM_FI_DEV_RETIRED_DBE",
    "dcgm_retired_pages_pending": "DCGM_FI_DEV_RETIRED_PENDING",
    "dcgm_nvlink_flit_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_data_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_replay_error_count_total": "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_recovery_error_count_total": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_bandwidth_total": "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "dcgm_fi_prof_gr_engine_active": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "dcgm_fi_prof_sm_active": "DCGM_FI_PROF_SM_ACTIVE",
    "dcgm_fi_prof_sm_occupancy": "DCGM_FI_PROF_SM_OCCUPANCY",
    "dcgm_fi_prof_pipe_tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "dcgm_fi_prof_dram_active": "DCGM_FI_PROF_DRAM_ACTIVE",
    "dcgm_fi_prof_pcie_tx_bytes": "DCGM_FI_PROF_PCIE_TX_BYTES",
    "dcgm_fi_prof_pcie_rx_bytes": "DCGM_FI_PROF_PCIE_RX_BYTES",
}


@dataclass(frozen=True, slots=True)
class CounterRow:
    """One row: `name` as written, `field` the DCGM (or `DCGM_EXP_*`) field it stands for."""

    line: int
    name: str
    field: str
    type: str
    help: str


def field_of(name: str) -> str | None:
    """The field a FIELD column names (a 1.x name → its DCGM field); None if it names none."""
    if name in LEGACY_NAMES:
        return LEGACY_NAMES[name]
    if name.startswith("DCGM_EXP_"):
        return name if name in EXPORTER_FIELDS else None
    return name if _DCGM_FIELD.fullmatch(name) else None


def read(path: str) -> list[CounterRow]:
    """The rows of the file at `path`; ValueError naming the file, line and problem (every
    problem found, not just the first)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path}: larger than {MAX_BYTES} bytes; is this a counters CSV?")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse(text, path)


def parse(text: str, source: str) -> list[CounterRow]:
    """The rows of counters-CSV `text`; ValueError listing every bad line of `source`."""
    rows: list[CounterRow] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            columns = [
                c.strip()
                for c in next(csv.reader(io.StringIO(stripped), skipinitialspace=True, strict=True))
            ]
        except csv.Error as exc:
            problems.append(f"{source}:{number}: {exc}")
            continue
        problem = _check(columns)
        if problem:
            problems.append(f"{source}:{number}: {problem}")
            continue
        name, type_, help_ = columns
        field = field_of(name)
        assert field is not None  # _check refused the others
        rows.append(CounterRow(number, name, field, type_, help_))
    if not rows and not problems:
        problems.append(f"{source}: lists no field (every line is blank or a comment)")
    if problems:
        raise ValueError("; ".join(problems))
    return rows


def _check(columns: list[str]) -> str:
    if len(columns) != 3:
        return (
            f"expected 3 columns (field, Prometheus type, help), found {len(columns)}: "
            f"{', '.join(columns)!r}"
        )
    name, type_, _ = columns
    if field_of(name) is None:
        return (
            f"{name!r} is not a DCGM field (DCGM_FI_*), one of dcgm-exporter's own "
            f"({', '.join(EXPORTER_FIELDS)}) or a 1.x name (dcgm_sm_clock, ...)"
        )
    if type_ not in PROMETHEUS_TYPES and not name.startswith("DCGM_EXP_"):
        return f"unknown Prometheus type {type_!r} (valid: {', '.join(PROMETHEUS_TYPES)})"
    return ""
