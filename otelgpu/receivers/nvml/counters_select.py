"""What a dcgm-exporter counters CSV selects: each row's field as a catalog metric (and, for a
metric dcgm-exporter splits into several fields, the one attribute value that is that field),
or the reason otelgpu cannot serve it.

The served fields are exactly those the receiver's naming table renders in `naming: dcgm`
(`dcgm_names.NAMING`), so a field served here always comes out under its dcgm name, and under
its catalog name in `naming: otel`. The reasons for the others are facts about NVML and DCGM
(`NOT_SERVED`, `_PREFIX_REASONS`). `docs/migrating-from-dcgm-exporter.md`'s field table is
checked against `verdict` by a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from otelgpu.pdata.model import AttrValue
from otelgpu.receivers.nvml.counters_csv import CounterRow
from otelgpu.receivers.nvml.dcgm_names import NAMING
from otelgpu.receivers.nvml.metrics import BY_NAME

GPM_NOTE = (
    "read through NVML GPM on Hopper and later; profiling before Hopper needs DCGM "
    "(no series there)"
)
PCIE_NOTE = (
    "NVML GPM's average on Hopper and later; before Hopper a 20 ms NVML sample "
    "(nvmlDeviceGetPcieThroughput), not an average"
)
LABEL_NOTE = "a label, not switched by the CSV"
LIMIT_NOTE = (
    "where the board answers it (read once per GPU); Hopper boards may answer only "
    "DCGM_FI_DEV_GPU_TEMP_LIMIT, the margin to their T.Limit"
)
# Served fields whose reading differs from DCGM's in a way a user must know (the field table
# of docs/migrating-from-dcgm-exporter.md has the rest).
_SERVED_NOTES: Mapping[str, str] = {
    "DCGM_FI_DEV_SHUTDOWN_TEMP": LIMIT_NOTE,
    "DCGM_FI_DEV_SLOWDOWN_TEMP": LIMIT_NOTE,
    "DCGM_FI_DEV_GPU_MAX_OP_TEMP": LIMIT_NOTE,
    "DCGM_FI_PROF_PCIE_TX_BYTES": PCIE_NOTE,
    "DCGM_FI_PROF_PCIE_RX_BYTES": PCIE_NOTE,
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "in a vGPU guest only (bare metal has no series)",
}
# Label fields (type `label` in dcgm-exporter's files): where otelgpu has them, always.
LABELS: Mapping[str, str] = {
    "DCGM_FI_DRIVER_VERSION": "label DCGM_FI_DRIVER_VERSION on every series; " + LABEL_NOTE,
    "DCGM_FI_DEV_SERIAL": "label DCGM_FI_DEV_SERIAL on hw_gpu_info; " + LABEL_NOTE,
    "DCGM_FI_DEV_VBIOS_VERSION": "label DCGM_FI_DEV_VBIOS_VERSION on hw_gpu_info; " + LABEL_NOTE,
}
NOT_SERVED: Mapping[str, str] = {
    "DCGM_EXP_CLOCK_EVENTS_COUNT": (
        "dcgm-exporter's count of clock events in a window; otelgpu has the state per reason, "
        "nvidia.gpu.clock.event.active (switch it on under metrics; changes() counts events)"
    ),
    "DCGM_EXP_XID_ERRORS_COUNT": (
        "dcgm-exporter's count of XIDs in a window; DCGM_FI_DEV_XID_ERRORS "
        "(nvidia.gpu.xid.errors, per code) with increase(...[5m]) is the same window"
    ),
    "DCGM_EXP_GPU_HEALTH_STATUS": (
        "DCGM's health watches; otelgpu's health summary is nvidia.gpu.up (switch it on under "
        "metrics)"
    ),
    "DCGM_EXP_P2P_STATUS": "peer-to-peer NVLink status needs DCGM",
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": (
        "served as DCGM_FI_PROF_PCIE_TX_BYTES (nvidia.gpu.pcie.tx.throughput); list that field"
    ),
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": (
        "served as DCGM_FI_PROF_PCIE_RX_BYTES (nvidia.gpu.pcie.rx.throughput); list that field"
    ),
    "DCGM_FI_DEV_FB_USED_PERCENT": ("otel naming only: hw.gpu.memory.utilization (a ratio 0..1)"),
    "DCGM_FI_DEV_MEM_MAX_OP_TEMP": (
        "the memory's maximum operating temperature is not read (hw.temperature.limit has the "
        "GPU's own limits: DCGM_FI_DEV_GPU_MAX_OP_TEMP, _SLOWDOWN_TEMP, _SHUTDOWN_TEMP)"
    ),
    "DCGM_FI_NVML_VERSION": "otelgpu does not read this static field",
    "DCGM_FI_DEV_BRAND": "otelgpu does not read this static field",
    "DCGM_FI_DEV_OEM_INFOROM_VER": "otelgpu does not read this static field",
    "DCGM_FI_DEV_ECC_INFOROM_VER": "otelgpu does not read this static field",
    "DCGM_FI_DEV_POWER_INFOROM_VER": "otelgpu does not read this static field",
    "DCGM_FI_DEV_INFOROM_IMAGE_VER": "otelgpu does not read this static field",
}
# Families of DCGM fields, by prefix (first match wins).
_PREFIX_REASONS: tuple[tuple[str, str], ...] = (
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_L",
        "NVML has no per-link byte counter; per-link errors and state are "
        "nvidia.gpu.nvlink.link.errors and nvidia.gpu.nvlink.state",
    ),
    ("DCGM_FI_DEV_NVSWITCH_", "NVSwitch fields need DCGM (otelgpu reads GPUs through NVML)"),
    ("DCGM_FI_DEV_CPU_", "CPU fields need DCGM (otelgpu reads GPUs through NVML)"),
    ("DCGM_FI_DEV_DIAG_", "diagnostic results need DCGM's diagnostics"),
    ("DCGM_FI_PROF_", "a profiling field NVML's GPM does not give: needs DCGM"),
)
_NOT_SERVED_MARK = ": not served: "
UNKNOWN_REASON = "otelgpu has no NVML reading for this DCGM field"


@dataclass(frozen=True, slots=True)
class Verdict:
    """How otelgpu serves one field: `metric` (with `key`=`value` picking its points where
    the metric is several fields), or `reason` why not; `note` qualifies a served field."""

    field: str
    metric: str = ""
    key: str = ""
    value: AttrValue = ""
    note: str = ""
    reason: str = ""

    @property
    def served(self) -> bool:
        return bool(self.metric) or self.field in LABELS


def _served_fields() -> dict[str, Verdict]:
    out: dict[str, Verdict] = {}
    for metric, names in NAMING.dcgm.items():
        gpm = BY_NAME[metric].source_kind == "gpm"
        if names.split_by:
            for value, found in names.splits.items():
                note = _SERVED_NOTES.get(found.name, "")
                out[found.name] = Verdict(found.name, metric, names.split_by, value, note=note)
        elif names.field is not None:
            note = _SERVED_NOTES.get(names.field.name, GPM_NOTE if gpm else "")
            out[names.field.name] = Verdict(names.field.name, metric, note=note)
    return out


SERVED: Mapping[str, Verdict] = _served_fields()


def verdict(dcgm_field: str) -> Verdict:
    """How otelgpu serves `dcgm_field` (a DCGM_FI_* or DCGM_EXP_* name)."""
    if dcgm_field in SERVED:
        return SERVED[dcgm_field]
    if dcgm_field in LABELS:
        return Verdict(dcgm_field, note=LABELS[dcgm_field])
    if dcgm_field in NOT_SERVED:
        return Verdict(dcgm_field, reason=NOT_SERVED[dcgm_field])
    for prefix, reason in _PREFIX_REASONS:
        if dcgm_field.startswith(prefix):
            return Verdict(dcgm_field, reason=reason)
    return Verdict(dcgm_field, reason=UNKNOWN_REASON)


@dataclass(frozen=True)
class Selection:
    """What one counters CSV selects.

    metrics: the catalog metrics to emit. only: for a metric that is several fields, the
    attribute and the values of the listed fields (its other points are dropped). rows: each
    row with its verdict, in file order.
    """

    path: str
    metrics: frozenset[str]
    only: Mapping[str, tuple[str, frozenset[AttrValue]]]
    rows: tuple[tuple[CounterRow, Verdict], ...] = field(default=())

    def unserved(self) -> tuple[str, ...]:
        """The notes of the rows otelgpu does not serve."""
        return tuple(n for n in self.notes() if _NOT_SERVED_MARK in n)

    def notes(self) -> tuple[str, ...]:
        """One line per row that is not served as is: the reason, or the qualification."""
        out = []
        for row, v in self.rows:
            named = row.name if row.name == row.field else f"{row.name} ({row.field})"
            if not v.served:
                out.append(f"{self.path}:{row.line}: {named}{_NOT_SERVED_MARK}{v.reason}")
            elif v.note or row.name != row.field:
                notes = [v.note] if v.note else []
                if row.name != row.field:
                    notes.insert(0, f"served as {row.field} (otelgpu has no 1.x names)")
                out.append(f"{self.path}:{row.line}: {named}: {'; '.join(notes)}")
        return tuple(out)

    def summary(self) -> str:
        served = sum(v.served for _, v in self.rows)
        return (
            f"{self.path}: {served} of {len(self.rows)} fields served, "
            f"{len(self.rows) - served} not served"
        )


def select(path: str, rows: list[CounterRow]) -> Selection:
    """The metrics and points that `rows` (read from `path`) ask for."""
    judged = tuple((row, verdict(row.field)) for row in rows)
    wanted: dict[str, set[AttrValue]] = {}
    keys: dict[str, str] = {}
    for _, v in judged:
        if v.metric:
            wanted.setdefault(v.metric, set())
            if v.key:
                keys[v.metric] = v.key
                wanted[v.metric].add(v.value)
    only: dict[str, tuple[str, frozenset[AttrValue]]] = {}
    for metric, key in keys.items():
        only[metric] = (key, frozenset(wanted[metric]))
    return Selection(path, frozenset(wanted), only, judged)
