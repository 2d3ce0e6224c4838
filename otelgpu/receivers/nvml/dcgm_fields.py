"""The catalog's metrics as dcgm-exporter's fields: which field a point is, in which unit, and
why a metric is on by default.

Facts from NVIDIA/dcgm-exporter: the fields its `etc/default-counters.csv` enables
(`DCGM_DEFAULT_COUNTERS`), the metrics it splits into a field per value of one attribute
(`DCGM_SPLIT`), and its units
(`dcgm_scale`: the factor from the catalog's unit). `dcgm_names.py` builds the naming table
exporters render from these; `default_reason` gives the Default column of `docs/metrics.md`;
`ON_MIG_FROM_GPU` are the readings dcgm-exporter serves on a MIG GPU's instances in its place.
"""

from __future__ import annotations

from collections.abc import Mapping

from otelgpu.pdata.model import AttrValue
from otelgpu.receivers.nvml.fields_parity import ERROR_TYPE, PARITY_DCGM_SPLIT
from otelgpu.receivers.nvml.metrics import (
    BY_NAME,
    CATALOG,
    GPU_TASK,
    LIMIT_TYPE,
    SENSOR_LOCATION,
    MetricSpec,
)

# dcgm-exporter's default counters: the fields its `etc/default-counters.csv` enables
# (NVIDIA/dcgm-exporter, main branch, release 4.5.3-4.8.2; DCGM_FI_DRIVER_VERSION, a label
# there, is left out). The lean default: a catalog metric carrying one of them is on.
DCGM_DEFAULT_COUNTERS: frozenset[str] = frozenset(
    {
        "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
    }
)  # fmt: skip

# The NVML calls a MIG instance answers for itself (its memory) and those MIG does not support
# (the utilization rates: DCGM has no *_UTIL field on a GPU instance either).
_MIG_OWN_OR_NONE = frozenset(
    {"call:nvmlDeviceGetMemoryInfo", "call:nvmlDeviceGetUtilizationRates",
     "call:nvmlDeviceGetEncoderUtilization", "call:nvmlDeviceGetDecoderUtilization"}
)  # fmt: skip
# The metrics dcgm-exporter serves on each GPU instance of a MIG GPU with the GPU's reading:
# it watches the instances in the GPU's place (`-d f`), and DCGM answers a device-level field
# for a GPU instance with its GPU's value. These are the catalog's readings of the whole GPU
# (NVML fields, calls and XID events) but those above; GPM activity is read per instance.
ON_MIG_FROM_GPU: frozenset[str] = frozenset(
    spec.name
    for spec in CATALOG
    if spec.source_kind in ("field", "call", "event")
    and not _MIG_OWN_OR_NONE.intersection(spec.sources)
)

# Metrics that dcgm-exporter splits into several fields, told apart here by one attribute.
DCGM_SPLIT: Mapping[str, tuple[str, Mapping[AttrValue, str]]] = {
    "hw.gpu.utilization": (
        GPU_TASK,
        {
            "general": "DCGM_FI_DEV_GPU_UTIL",
            "encoder": "DCGM_FI_DEV_ENC_UTIL",
            "decoder": "DCGM_FI_DEV_DEC_UTIL",
        },
    ),
    "hw.temperature": (
        SENSOR_LOCATION,
        {"gpu": "DCGM_FI_DEV_GPU_TEMP", "memory": "DCGM_FI_DEV_MEMORY_TEMP"},
    ),
    "hw.temperature.limit": (
        LIMIT_TYPE,
        {
            "high.critical": "DCGM_FI_DEV_SHUTDOWN_TEMP",
            "high.degraded": "DCGM_FI_DEV_SLOWDOWN_TEMP",
            "max": "DCGM_FI_DEV_GPU_MAX_OP_TEMP",
        },
    ),
    "hw.errors": (
        ERROR_TYPE,
        {
            "corrected": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            "uncorrected": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        },
    ),
    "nvidia.gpu.memory.remapped_rows": (
        ERROR_TYPE,
        {
            "corrected": "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
            "uncorrected": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        },
    ),
    **PARITY_DCGM_SPLIT,
}

# OTel value * factor = dcgm-exporter value (it reports %, MiB, MHz, mJ and ns).
_DCGM_UNIT_SCALE: Mapping[str, float] = {
    "1": 100.0, "By": 1 / 2**20, "Hz": 1e-6, "J": 1e3, "s": 1e9
}  # fmt: skip
_DCGM_UNSCALED = frozenset(
    {"nvidia.gpu.memory.row_remap.failure", "nvidia.gpu.pcie.tx.throughput",
     "nvidia.gpu.pcie.rx.throughput", "nvidia.gpu.nvlink.io"}
)  # fmt: skip
# dcgm's DCGM_FI_PROF_* activity fields are ratios 0..1 like ours.
_DCGM_RATIO = frozenset(s.name for s in CATALOG if s.dcgm.startswith("DCGM_FI_PROF_"))


def dcgm_name(metric: str, attributes: Mapping[str, AttrValue]) -> str:
    """The dcgm-exporter field name of one data point ("" if dcgm has none)."""
    split = DCGM_SPLIT.get(metric)
    if split is not None:
        key, names = split
        return names.get(attributes.get(key, ""), "")
    spec = BY_NAME.get(metric)
    return spec.dcgm if spec else ""


def fields_of(spec: MetricSpec) -> tuple[str, ...]:
    """Every dcgm-exporter field name a spec's points can map to."""
    split = DCGM_SPLIT.get(spec.name)
    if split is not None:
        return tuple(split[1].values())
    return (spec.dcgm,) if spec.dcgm else ()


# Why a metric is on by default (the Default column of docs/metrics.md).
ON_DCGM = "dcgm-exporter default"
ON_HEALTH = "agent health"


def default_reason(spec: MetricSpec) -> str:
    """Why `spec` is on by default: it carries one of dcgm-exporter's default counters, or it
    is the agent's view of the GPU's health; "" when it is opt-in (or on without one of these
    reasons, which a test forbids)."""
    if not spec.enabled:
        return ""
    if DCGM_DEFAULT_COUNTERS.intersection(fields_of(spec)):
        return ON_DCGM
    return ON_HEALTH if spec.source_kind == "agent" else ""


def dcgm_scale(spec: MetricSpec) -> float:
    """Factor from the OTel value to dcgm-exporter's unit (1.0 where they agree)."""
    if spec.name in _DCGM_UNSCALED or spec.name in _DCGM_RATIO:
        return 1.0
    return _DCGM_UNIT_SCALE.get(spec.unit, 1.0)
