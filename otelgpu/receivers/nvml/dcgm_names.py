"""The nvml receiver's metrics in dcgm-exporter's names: the naming table its factory carries.

Built once from the catalog (`MetricSpec.dcgm`; `dcgm_fields.DCGM_SPLIT` for the metrics
dcgm-exporter splits into several fields by one attribute), each field's HELP text
(`dcgm_help.py`) and dcgm-exporter's unit per field, checked against its
`etc/default-counters.csv` help texts: utilization in percent (0..100) for the
`DCGM_FI_DEV_*_UTIL` fields but a ratio (0..1) for the `DCGM_FI_PROF_*` activity fields,
framebuffer memory in MiB, clocks in MHz, energy in mJ, power in W, temperatures in °C, PCIe
throughput in bytes per second. A field whose unit is not listed here, or that the catalog's
unit does not convert to, has no dcgm name (the exporter keeps the OTel one).

The fields DCGM keeps as integers (`DCGM_INTEGER`) are printed whole, as dcgm-exporter prints
them (`55`, not `55.00000000000001`), and its doubles with six decimals (`0.494666`, not
`0.49466595567035876`). The XID field holds the code of the GPU's latest XID (`value_from`,
`latest`: the receiver lists a GPU's XID codes latest last), with the code as dcgm-exporter's
`err_code` label, and reads 0 (`err_code="0"`, "No Error") on every GPU whose XIDs the receiver
watches until its first one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from otelgpu.pdata.naming import DcgmField, DcgmNames, NamingTable
from otelgpu.receivers.nvml import fields_parity
from otelgpu.receivers.nvml.dcgm_fields import DCGM_SPLIT
from otelgpu.receivers.nvml.dcgm_help import DCGM_HELP
from otelgpu.receivers.nvml.metrics import CATALOG, XID_CODE, MetricSpec

# dcgm-exporter's unit per field (UCUM spelling; `{count}` for plain counts).
DCGM_UNITS: Mapping[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "%",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "%",
    "DCGM_FI_DEV_ENC_UTIL": "%",
    "DCGM_FI_DEV_DEC_UTIL": "%",
    "DCGM_FI_DEV_FB_USED": "MiBy",
    "DCGM_FI_DEV_FB_FREE": "MiBy",
    "DCGM_FI_DEV_FB_RESERVED": "MiBy",
    "DCGM_FI_DEV_FB_TOTAL": "MiBy",
    "DCGM_FI_DEV_SM_CLOCK": "MHz",
    "DCGM_FI_DEV_MEM_CLOCK": "MHz",
    "DCGM_FI_DEV_GPU_TEMP": "Cel",
    "DCGM_FI_DEV_MEMORY_TEMP": "Cel",
    "DCGM_FI_DEV_SHUTDOWN_TEMP": "Cel",
    "DCGM_FI_DEV_SLOWDOWN_TEMP": "Cel",
    "DCGM_FI_DEV_GPU_MAX_OP_TEMP": "Cel",
    "DCGM_FI_DEV_GPU_TEMP_LIMIT": "Cel",
    "DCGM_FI_DEV_POWER_USAGE": "W",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "W",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "mJ",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "{count}",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "By/s",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "By/s",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "By",
    "DCGM_FI_DEV_XID_ERRORS": "{count}",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "{count}",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "{count}",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "{count}",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "{count}",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "{bool}",
    "DCGM_FI_PROF_SM_ACTIVE": "1",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "1",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "1",
    "DCGM_FI_PROF_DRAM_ACTIVE": "1",
    **fields_parity.PARITY_DCGM_UNITS,
}

# The fields above that DCGM keeps as integers (DCGM_FT_INT64), which dcgm-exporter prints with
# %d. The doubles (DCGM_FT_DOUBLE) are power and every ratio (the DCGM_FI_PROF_* activity and
# occupancy fields, unit 1).
DCGM_INTEGER: frozenset[str] = frozenset(
    field
    for field, unit in DCGM_UNITS.items()
    if unit != "1" and field not in {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT"}
)
XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"

# The fields whose type in dcgm-exporter's counters CSV (`etc/default-counters.csv`,
# `etc/dcp-metrics-included.csv`) is not the one the catalog metric's kind gives: the CSV's
# type is what its users' queries and recording rules were written for. The pages pending
# retirement are a level (the catalog's gauge), but the CSV declares a counter.
DCGM_TYPES: Mapping[str, Literal["gauge", "counter"]] = {
    "DCGM_FI_DEV_RETIRED_PENDING": "counter",
}

# (catalog unit, dcgm unit) → factor; a pair not listed here is a catalog/dcgm mismatch.
_CONVERSIONS: Mapping[tuple[str, str], float] = {
    ("1", "%"): 100.0,
    ("1", "1"): 1.0,
    ("1", "{bool}"): 1.0,
    ("{state}", "{bool}"): 1.0,
    ("By", "MiBy"): 1 / 2**20,
    ("By", "By"): 1.0,
    ("By/s", "By/s"): 1.0,
    ("Hz", "MHz"): 1e-6,
    ("J", "mJ"): 1e3,
    ("W", "W"): 1.0,
    ("Cel", "Cel"): 1.0,
    **fields_parity.PARITY_DCGM_CONVERSIONS,
}


def conversion(unit: str, dcgm_field: str) -> float:
    """The factor from the catalog's `unit` to dcgm-exporter's; KeyError when unknown."""
    dcgm_unit = DCGM_UNITS[dcgm_field]
    if unit == dcgm_unit or (unit.startswith("{") and dcgm_unit.startswith("{")):
        return 1.0
    return _CONVERSIONS[(unit, dcgm_unit)]


def dcgm_field(name: str, unit: str) -> DcgmField | None:
    """How a point in `unit` renders as the field `name`; None when it cannot."""
    try:
        scale = conversion(unit, name)
    except KeyError:
        return None
    help_ = DCGM_HELP[name]
    if name == XID_FIELD:  # dcgm-exporter's gauge holds the XID code itself
        return DcgmField(name, scale, type="gauge", value_from=XID_CODE, help=help_, latest=True)
    return DcgmField(
        name, scale, integer=name in DCGM_INTEGER, type=DCGM_TYPES.get(name, ""), help=help_
    )


def dcgm_names(spec: MetricSpec) -> DcgmNames | None:
    """The dcgm fields of one catalog metric; None when dcgm-exporter has none."""
    split = DCGM_SPLIT.get(spec.name)
    if split is not None:
        key, names = split
        splits = {v: f for v, n in names.items() if (f := dcgm_field(n, spec.unit)) is not None}
        return DcgmNames(spec.unit, split_by=key, splits=splits) if splits else None
    found = dcgm_field(spec.dcgm, spec.unit) if spec.dcgm else None
    if found is None:
        return None
    return DcgmNames(spec.unit, found)


NAMING = NamingTable(
    dcgm={spec.name: names for spec in CATALOG if (names := dcgm_names(spec)) is not None},
    dcgm_labels={XID_CODE: "err_code"},
)
