"""Catalog entries for the readings dcgm-exporter users alert on, kept apart from `metrics.py`
so the base catalog stays short: clock events and violation time, NVLink errors and link state,
ECC lifetime counts, retired pages, row-remap pending, PCIe link, vGPU licence, and the extra
GPM activity metrics (the health summary's rules are in `health.py`).

Rows are plain tuples in `MetricSpec` field order (name, unit, kind, monotonic, description,
enabled, source, dcgm, attributes) so this module does not import `metrics.py` (which imports
it). A row is opt-in unless it carries one of dcgm-exporter's default counters
(`dcgm_fields.DCGM_DEFAULT_COUNTERS`, the lean default; a test holds the two together).
Field IDs, per-field point attributes and dcgm unit facts for these rows live here too;
`sources.py`, the exporter's dcgm table and the simulated backend read them from here.
"""

from __future__ import annotations

from collections.abc import Mapping

from otelgpu.pdata.model import AttrValue, MetricKind

ERROR_TYPE = "error.type"  # hardware semantic conventions (hw.errors); metrics.py uses it too
CLOCK_EVENT_REASON = "nvidia.gpu.clock.event.reason"
VIOLATION_POLICY = "nvidia.gpu.clock.violation.policy"
NVLINK_LINK = "nvidia.gpu.nvlink.link"  # the link number, an int
PCIE_LINK_LIMIT = "nvidia.gpu.pcie.link.limit"  # current | max
HW_STATE = "hw.state"  # hardware semantic conventions: ok | degraded | failed
HEALTH_REASON = "nvidia.gpu.health.reason"

Row = tuple[str, str, MetricKind, bool, str, bool, str, str, tuple[str, ...]]
GAUGE, SUM = MetricKind.GAUGE, MetricKind.SUM

# NVML field IDs (nvml.h) these rows read, batched with the base catalog's.
PARITY_FIELD_IDS: Mapping[str, int] = {
    "NVML_FI_DEV_ECC_SBE_AGG_TOTAL": 5,
    "NVML_FI_DEV_ECC_DBE_AGG_TOTAL": 6,
    "NVML_FI_DEV_RETIRED_SBE": 29,
    "NVML_FI_DEV_RETIRED_DBE": 30,
    "NVML_FI_DEV_RETIRED_PENDING": 31,
    "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 38,
    "NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": 45,
    "NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": 52,
    "NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 59,
    "NVML_FI_DEV_PERF_POLICY_POWER": 74,
    "NVML_FI_DEV_PERF_POLICY_THERMAL": 75,
    "NVML_FI_DEV_PERF_POLICY_SYNC_BOOST": 76,
    "NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT": 77,
    "NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION": 78,
    "NVML_FI_DEV_PERF_POLICY_RELIABILITY": 79,
    "NVML_FI_DEV_REMAPPED_PENDING": 144,
}

# Perf-policy field → the violation policy it reports (dcgm-exporter's *_VIOLATION fields).
VIOLATIONS: Mapping[str, tuple[str, str]] = {
    "NVML_FI_DEV_PERF_POLICY_POWER": ("power", "DCGM_FI_DEV_POWER_VIOLATION"),
    "NVML_FI_DEV_PERF_POLICY_THERMAL": ("thermal", "DCGM_FI_DEV_THERMAL_VIOLATION"),
    "NVML_FI_DEV_PERF_POLICY_SYNC_BOOST": ("sync_boost", "DCGM_FI_DEV_SYNC_BOOST_VIOLATION"),
    "NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT": ("board_limit", "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION"),
    "NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION": (
        "low_utilization",
        "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
    ),
    "NVML_FI_DEV_PERF_POLICY_RELIABILITY": ("reliability", "DCGM_FI_DEV_RELIABILITY_VIOLATION"),
}
# NVLink error total field → (error.type, dcgm field).
NVLINK_TOTALS: Mapping[str, tuple[str, str]] = {
    "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": (
        "crc_flit",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    ),
    "NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": (
        "crc_data",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    ),
    "NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": (
        "replay",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    ),
    "NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": (
        "recovery",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    ),
}
# nvmlDeviceGetNvLinkErrorCounter counters (NVML_NVLINK_ERROR_DL_*) → error.type.
NVLINK_COUNTERS: tuple[tuple[int, str], ...] = (
    (2, "crc_flit"),
    (3, "crc_data"),
    (0, "replay"),
    (1, "recovery"),
)
NVLINK_MAX_LINKS = 18  # Hopper's 18 links; NVML_NVLINK_MAX_LINKS (36) leaves room for later
# nvmlDeviceGetCurrentClocksEventReasons bits → the `clock_event` names dcgm-exporter uses.
CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "clocks_setting"),
    (0x4, "power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)

_NS = 1e-9  # perf-policy counters are nanoseconds; the catalog unit is seconds


def _attrs(key: str, value: AttrValue) -> dict[str, AttrValue]:
    return {key: value}


# field name → (point attributes, factor to the catalog unit), as sources._FIELD_POINT.
PARITY_FIELD_POINTS: Mapping[str, tuple[Mapping[str, AttrValue], float]] = {
    "NVML_FI_DEV_ECC_SBE_AGG_TOTAL": (_attrs(ERROR_TYPE, "corrected"), 1.0),
    "NVML_FI_DEV_ECC_DBE_AGG_TOTAL": (_attrs(ERROR_TYPE, "uncorrected"), 1.0),
    "NVML_FI_DEV_RETIRED_SBE": (_attrs(ERROR_TYPE, "corrected"), 1.0),
    "NVML_FI_DEV_RETIRED_DBE": (_attrs(ERROR_TYPE, "uncorrected"), 1.0),
    **{f: (_attrs(ERROR_TYPE, kind), 1.0) for f, (kind, _) in NVLINK_TOTALS.items()},
    **{f: (_attrs(VIOLATION_POLICY, p), _NS) for f, (p, _) in VIOLATIONS.items()},
}

# GPM metric IDs (NVML_GPM_METRIC_*) beyond the base catalog's, and each one's factor from
# NVML's unit (% or MiB/s) to the catalog's (ratio or By/s). Metrics not listed are % → ratio.
PARITY_GPM_IDS: Mapping[str, int] = {
    "NVML_GPM_METRIC_SM_OCCUPANCY": 3,
    "NVML_GPM_METRIC_FP64_UTIL": 11,
    "NVML_GPM_METRIC_FP32_UTIL": 12,
    "NVML_GPM_METRIC_FP16_UTIL": 13,
    "NVML_GPM_METRIC_PCIE_TX_PER_SEC": 20,
    "NVML_GPM_METRIC_PCIE_RX_PER_SEC": 21,
    "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC": 60,
    "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC": 61,
}
GPM_SCALE: Mapping[str, float] = {
    "NVML_GPM_METRIC_PCIE_TX_PER_SEC": float(1 << 20),
    "NVML_GPM_METRIC_PCIE_RX_PER_SEC": float(1 << 20),
    "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC": float(1 << 20),
    "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC": float(1 << 20),
}


def gpm_convert(name: str, value: float) -> float:
    """A GPM reading in the catalog's unit: MiB/s → By/s for the rates, % → ratio otherwise
    (divided, not multiplied by 0.01, so 42 % reads 0.42 exactly).

    A ratio is held to 0..1: over a short interval GPM's counters can give more than 100 %
    (seen on an H100: DRAM_BW_UTIL above 100 % between two samples ~7 ms apart), and a
    utilization above 1 is a sampling artefact, not a reading."""
    factor = GPM_SCALE.get(name)
    if factor is None:
        return min(max(value / 100, 0.0), 1.0)
    return value * factor


def _g(
    name: str, unit: str, source: str, dcgm: str, text: str, *attrs: str, on: bool = False
) -> Row:
    return (name, unit, GAUGE, False, text, on, source, dcgm, attrs)


def _c(
    name: str, unit: str, source: str, dcgm: str, text: str, *attrs: str, on: bool = False
) -> Row:
    return (name, unit, SUM, True, text, on, source, dcgm, attrs)


def _fields(names: Mapping[str, object]) -> str:
    return "field:" + ",".join(names)


PARITY_ROWS: tuple[Row, ...] = (
    _g(
        "nvidia.gpu.clock.event.active", "{state}", "call:nvmlDeviceGetCurrentClocksEventReasons",
        "", "1 for each reason currently holding the GPU's clocks down, 0 otherwise, one series "
        "per reason (gpu_idle, clocks_setting, power_cap, hw_slowdown, sync_boost, sw_thermal, "
        "hw_thermal, hw_power_brake, display_clocks; dcgm-exporter's clock_event names).",
        CLOCK_EVENT_REASON,
    ),
    _g(
        "nvidia.gpu.clock.event.reasons", "{bitmask}",
        "call:nvmlDeviceGetCurrentClocksEventReasons", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "The clock event reasons as NVML's bitmask (nvmlClocksEventReason*), as DCGM reports "
        "them; nvidia.gpu.clock.event.active is the same reading one series per reason.",
    ),
    _c(
        "nvidia.gpu.clock.violation.time", "s", _fields(VIOLATIONS), "",
        "Time the clocks were held below the requested ones, per policy (power, thermal, "
        "sync_boost, board_limit, low_utilization, reliability); NVML counts nanoseconds since "
        "the driver loaded (dcgm-exporter's *_VIOLATION fields, in ns).",
        VIOLATION_POLICY,
    ),
    _c(
        "nvidia.gpu.nvlink.errors", "{error}", _fields(NVLINK_TOTALS), "",
        "NVLink errors summed over all links; error.type is crc_flit, crc_data, replay or "
        "recovery.",
        ERROR_TYPE,
    ),
    _c(
        "nvidia.gpu.nvlink.link.errors", "{error}", "call:nvmlDeviceGetNvLinkErrorCounter", "",
        "NVLink errors per link (nvidia.gpu.nvlink.link); error.type as nvidia.gpu.nvlink.errors. "
        "Four NVML calls per link per cycle, hence off by default.",
        NVLINK_LINK, ERROR_TYPE,
    ),
    _g(
        "nvidia.gpu.nvlink.state", "{state}", "call:nvmlDeviceGetNvLinkState", "",
        "1 while an NVLink is active, 0 when it is down, per link (nvidia.gpu.nvlink.link); "
        "no series on GPUs without NVLink.",
        NVLINK_LINK,
    ),
    _c(
        "nvidia.gpu.ecc.aggregate.errors", "{error}",
        "field:NVML_FI_DEV_ECC_SBE_AGG_TOTAL,NVML_FI_DEV_ECC_DBE_AGG_TOTAL", "",
        "ECC errors over the GPU's lifetime (kept in the InfoROM across driver reloads); "
        "error.type is corrected or uncorrected.",
        ERROR_TYPE,
    ),
    _c(
        "nvidia.gpu.memory.retired_pages", "{page}",
        "field:NVML_FI_DEV_RETIRED_SBE,NVML_FI_DEV_RETIRED_DBE", "",
        "Memory pages retired (GPUs before Ampere; later ones remap rows); error.type is "
        "corrected (multiple single-bit errors) or uncorrected (a double-bit error).",
        ERROR_TYPE,
    ),
    _g(
        "nvidia.gpu.memory.retired_pages.pending", "{state}", "field:NVML_FI_DEV_RETIRED_PENDING",
        "DCGM_FI_DEV_RETIRED_PENDING",
        "1 while a page waits to be retired at the next driver reload or GPU reset.",
    ),
    _g(
        "nvidia.gpu.memory.row_remap.pending", "{state}", "field:NVML_FI_DEV_REMAPPED_PENDING",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "1 while a row remapping waits for a GPU reset to take effect.",
    ),
    _g(
        "nvidia.gpu.pcie.link.generation", "{generation}",
        "call:nvmlDeviceGetCurrPcieLinkGeneration", "",
        "PCIe link generation; nvidia.gpu.pcie.link.limit is current or max (the most GPU and "
        "slot both support). Idle GPUs drop the generation to save power.",
        PCIE_LINK_LIMIT,
    ),
    _g(
        "nvidia.gpu.pcie.link.width", "{lane}", "call:nvmlDeviceGetCurrPcieLinkWidth", "",
        "PCIe link width in lanes; nvidia.gpu.pcie.link.limit is current or max.",
        PCIE_LINK_LIMIT,
    ),
    _g(
        "nvidia.gpu.vgpu.license.status", "{state}", "call:nvmlDeviceGetGridLicensableFeatures",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        "1 when the vGPU guest holds a licence for an enabled feature, 0 when not; no series on "
        "bare metal (NVML reports no licensable features there).",
        on=True,  # the one row carrying a default counter of dcgm-exporter's
    ),
    _g(
        "nvidia.gpu.sm.occupancy", "1", "gpm:NVML_GPM_METRIC_SM_OCCUPANCY",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "Resident warps as a fraction of the SMs' maximum (GPM, Hopper and later).",
    ),
    _g(
        "nvidia.gpu.pipe.fp64.active", "1", "gpm:NVML_GPM_METRIC_FP64_UTIL",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "Fraction of time the FP64 pipes were active (GPM).",
    ),
    _g(
        "nvidia.gpu.pipe.fp32.active", "1", "gpm:NVML_GPM_METRIC_FP32_UTIL",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "Fraction of time the FP32 pipes were active (GPM).",
    ),
    _g(
        "nvidia.gpu.pipe.fp16.active", "1", "gpm:NVML_GPM_METRIC_FP16_UTIL",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "Fraction of time the FP16 pipes were active (GPM).",
    ),
    _g(
        "nvidia.gpu.gpm.pcie.tx.throughput", "By/s", "gpm:NVML_GPM_METRIC_PCIE_TX_PER_SEC", "",
        "PCIe bytes sent per second, averaged over the collection interval (GPM), on MIG "
        "instances too; on a whole GPU with GPM the same reading as "
        "nvidia.gpu.pcie.tx.throughput.",
    ),
    _g(
        "nvidia.gpu.gpm.pcie.rx.throughput", "By/s", "gpm:NVML_GPM_METRIC_PCIE_RX_PER_SEC", "",
        "PCIe bytes received per second, averaged over the collection interval (GPM).",
    ),
    _g(
        "nvidia.gpu.nvlink.tx.throughput", "By/s", "gpm:NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "NVLink bytes sent per second over all links, averaged over the interval (GPM).",
    ),
    _g(
        "nvidia.gpu.nvlink.rx.throughput", "By/s", "gpm:NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "NVLink bytes received per second over all links, averaged over the interval (GPM).",
    ),
)  # fmt: skip

# Metrics dcgm-exporter splits into several fields by one attribute (merged into DCGM_SPLIT).
PARITY_DCGM_SPLIT: Mapping[str, tuple[str, Mapping[AttrValue, str]]] = {
    "nvidia.gpu.clock.violation.time": (
        VIOLATION_POLICY,
        {policy: dcgm for policy, dcgm in VIOLATIONS.values()},
    ),
    "nvidia.gpu.nvlink.errors": (ERROR_TYPE, {kind: dcgm for kind, dcgm in NVLINK_TOTALS.values()}),
    "nvidia.gpu.ecc.aggregate.errors": (
        ERROR_TYPE,
        {
            "corrected": "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
            "uncorrected": "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        },
    ),
    "nvidia.gpu.memory.retired_pages": (
        ERROR_TYPE,
        {"corrected": "DCGM_FI_DEV_RETIRED_SBE", "uncorrected": "DCGM_FI_DEV_RETIRED_DBE"},
    ),
}

# dcgm-exporter's unit per field these rows map to (merged into the exporter's DCGM_UNITS).
PARITY_DCGM_UNITS: Mapping[str, str] = {
    **{dcgm: "ns" for _, dcgm in VIOLATIONS.values()},
    **{dcgm: "{count}" for _, dcgm in NVLINK_TOTALS.values()},
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "{bitmask}",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "{count}",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "{count}",
    "DCGM_FI_DEV_RETIRED_SBE": "{count}",
    "DCGM_FI_DEV_RETIRED_DBE": "{count}",
    "DCGM_FI_DEV_RETIRED_PENDING": "{bool}",
    "DCGM_FI_DEV_ROW_REMAP_PENDING": "{bool}",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "{bool}",
    "DCGM_FI_PROF_SM_OCCUPANCY": "1",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": "1",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": "1",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "1",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "By/s",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "By/s",
}
# (OTel unit, dcgm unit) → factor, for the pairs these rows add.
PARITY_DCGM_CONVERSIONS: Mapping[tuple[str, str], float] = {("s", "ns"): 1e9}
