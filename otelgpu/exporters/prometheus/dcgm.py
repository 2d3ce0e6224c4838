"""`naming: dcgm`: dcgm-exporter's metric names, label names and units.

Names come from the nvml receiver's catalog (`MetricSpec.dcgm`, and `DCGM_SPLIT` for the metrics
dcgm-exporter splits into several fields by one attribute). Units are dcgm-exporter's, checked
against its `etc/default-counters.csv` help texts: utilization in percent (0..100) for the
`DCGM_FI_DEV_*_UTIL` fields but a ratio (0..1) for the `DCGM_FI_PROF_*` activity fields, framebuffer
memory in MiB, clocks in MHz, energy in mJ, power in W, temperatures in °C, PCIe throughput in
bytes per second. Values are converted from the catalog's OTel unit by `DCGM_UNITS` below.

Values of the fields DCGM keeps as integers (`DCGM_INTEGER`) are rounded after the conversion,
so they print as dcgm-exporter prints them (`55`, not `55.00000000000001`; whole MiB, MHz, mJ).

Labels follow dcgm-exporter's templates: `Hostname` is the GPU's `host.name` (the node name in
Kubernetes; `dcgm_labels: {hostname: hostname}` spells it as dcgm-exporter after its rename); a
MIG instance's `device` is its GPU's (`nvidia0`), and its `UUID` the GPU's UUID; an XID renders
as dcgm-exporter's `DCGM_FI_DEV_XID_ERRORS` gauge: value the XID code, labels `err_code` and
`err_msg` (in `otel` naming it stays the per-code counter `nvidia.gpu.xid.errors`); a DRA
holder's claim is dcgm-exporter's `dra_claim_name` / `dra_claim_namespace`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from otelgpu.exporters.prometheus.dcgm_xid import xid_message
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Attributes, AttrValue
from otelgpu.receivers.nvml import fields_parity
from otelgpu.receivers.nvml import metrics as catalog

# A point's value in dcgm's unit → the value dcgm-exporter prints (see `DcgmField.convert`).
Convert = Callable[[float, Attributes], float]

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

# The fields above that DCGM keeps as integers (DCGM_FT_INT64; power and the DCGM_FI_PROF_*
# activity ratios are doubles). dcgm-exporter prints them with %d.
DCGM_INTEGER: frozenset[str] = frozenset(DCGM_UNITS) - {
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
}
_XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"

# (OTel unit, dcgm unit) → factor; a pair not listed here is a catalog/exporter mismatch.
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

# Resource and datapoint attributes with a dcgm-exporter label of their own. These names are
# authoritative: another attribute that sanitizes to the same name is dropped, so a pod label
# called `gpu` can never corrupt the `gpu` label a dashboard filters on.
LABELS: Mapping[str, str] = {
    semconv.GPU_INDEX: "gpu",
    semconv.HW_ID: "UUID",
    semconv.HW_NAME: "device",
    semconv.HW_MODEL: "modelName",
    semconv.HOST_NAME: "Hostname",  # `hostname` with dcgm_labels: {hostname: hostname}
    semconv.GPU_PCI_BUS_ID: "pci_bus_id",
    semconv.HW_DRIVER_VERSION: "DCGM_FI_DRIVER_VERSION",
    # dcgm-exporter renders these label fields when they are enabled in its CSV.
    semconv.HW_SERIAL_NUMBER: "DCGM_FI_DEV_SERIAL",
    semconv.HW_FIRMWARE_VERSION: "DCGM_FI_DEV_VBIOS_VERSION",
    semconv.GPU_REPLICA: "vgpu",
    semconv.K8S_POD_NAME: "pod",
    semconv.K8S_NAMESPACE_NAME: "namespace",
    semconv.K8S_CONTAINER_NAME: "container",
    # dcgm-exporter's DRA labels (`--kubernetes-enable-dra`); ours are on allocation series.
    semconv.GPU_RESOURCECLAIM_NAME: "dra_claim_name",
    semconv.GPU_RESOURCECLAIM_NAMESPACE: "dra_claim_namespace",
    semconv.MIG_PROFILE: "GPU_I_PROFILE",
    semconv.MIG_GPU_INSTANCE_ID: "GPU_I_ID",
    catalog.XID_CODE: "err_code",
    # Derived in dcgm naming only (`derive`): the XID's text, as dcgm-exporter's err_msg.
    "nvidia.xid.message": "err_msg",
}
_XID_MESSAGE = "nvidia.xid.message"
HOSTNAME_SPELLINGS = ("Hostname", "hostname")
# Runtime business labels: the key after the prefix, sanitized, behind dcgm-style prefixes.
# Pod labels get no prefix, as dcgm-exporter's `--kubernetes-enable-pod-labels` renders them.
PREFIXES: tuple[tuple[str, str], ...] = (
    (semconv.CONTAINER_ENV_PREFIX, "env_"),
    (semconv.CONTAINER_LABEL_PREFIX, "label_"),
    (semconv.POD_ANNOTATION_PREFIX, "annotation_"),
    (semconv.POD_LABEL_PREFIX, ""),
)


@dataclass(frozen=True, slots=True)
class DcgmField:
    """How one OTel metric (or one split of it) renders in dcgm naming."""

    name: str
    scale: float
    split_key: str  # the attribute that chose this field; not rendered as a label
    convert: Convert | None = None  # applied after `scale` (rounding, XID code as the value)
    type: str = ""  # the Prometheus type dcgm-exporter declares, where it differs from ours


def label_names(hostname: str = "Hostname") -> Mapping[str, str]:
    """`LABELS` with the host label spelled `hostname` (`Hostname` or dcgm-exporter's later
    lowercase rename, the `dcgm_labels.hostname` option)."""
    if hostname not in HOSTNAME_SPELLINGS:
        raise ValueError(f"hostname label must be one of {', '.join(HOSTNAME_SPELLINGS)}")
    return {**LABELS, semconv.HOST_NAME: hostname}


def derive(attributes: dict[str, AttrValue], mig: bool) -> None:
    """Adds or rewrites the attributes dcgm-exporter's labels need and ours do not carry: a MIG
    instance's `device` is its GPU's (`nvidia0/gi3` → `nvidia0`), an XID gets its text."""
    if mig:
        name = attributes.get(semconv.HW_NAME)
        if isinstance(name, str):
            attributes[semconv.HW_NAME] = name.partition("/")[0]
    code = attributes.get(catalog.XID_CODE)
    if code is not None:
        attributes[_XID_MESSAGE] = xid_message(code)


def _rounded(value: float, attributes: Attributes) -> float:
    return round(value)


def _xid_code(value: float, attributes: Attributes) -> float:
    return int(attributes.get(catalog.XID_CODE, 0))


def conversion(otel_unit: str, dcgm_field: str) -> float:
    """The factor from the catalog's unit to dcgm-exporter's; KeyError when unknown."""
    dcgm_unit = DCGM_UNITS[dcgm_field]
    if otel_unit == dcgm_unit or (otel_unit.startswith("{") and dcgm_unit.startswith("{")):
        return 1.0
    return _CONVERSIONS[(otel_unit, dcgm_unit)]


def field(metric: str, unit: str, attributes: Mapping[str, AttrValue]) -> DcgmField | None:
    """The dcgm field a data point renders as; None when dcgm-exporter has no equivalent."""
    split = catalog.DCGM_SPLIT.get(metric)
    if split is not None:
        key, names = split
        name = names.get(attributes.get(key, ""), "")
    else:
        spec = catalog.BY_NAME.get(metric)
        name, key = (spec.dcgm if spec else ""), ""
    if not name or name not in DCGM_UNITS:
        return None
    try:
        scale = conversion(unit, name)
    except KeyError:
        return None
    if name == _XID_FIELD:  # dcgm-exporter's gauge holds the XID code itself
        return DcgmField(name, scale, key, _xid_code, "gauge")
    return DcgmField(name, scale, key, _rounded if name in DCGM_INTEGER else None)
