"""The nvml receiver's metric catalog: one table that drives collection, config and docs.

Every metric the receiver can emit is one `MetricSpec` in `CATALOG`. The receiver reads only
the enabled specs, the config rejects names not in the table, and `docs/metrics.md` is rendered
from it (`render_markdown`), so the three cannot drift apart.

`source` says where the value comes from, as `<how>:<what>`:
- `field:NVML_FI_DEV_*[,...]` — batched through `nvmlDeviceGetFieldValues` (one call per GPU
  per cycle for all enabled fields);
- `call:nvmlDevice*` — a dedicated NVML call where no field ID exists;
- `gpm:NVML_GPM_METRIC_*` — GPU performance monitoring, from two samples one cycle apart;
- `event:nvmlEventTypeXidCriticalError` — counted from NVML events by a worker thread;
- `process:nvmlDeviceGetComputeRunningProcesses` — per-process memory;
- `process:nvmlDeviceGetProcessUtilization` — per-process utilization (both need
  `processes: true`);
- `agent:health` — the receiver's own view of whether the GPU answers.

`also` lists further sources feeding the same metric, told apart by an attribute (the memory
temperature is `hw.temperature{hw.sensor_location=memory}`, encoder and decoder utilization are
`hw.gpu.utilization{hw.gpu.task=encoder|decoder}`, as the hardware conventions have them).

Values are converted to the OTel unit (ratios 0..1, bytes, hertz, joules); `dcgm_fields.py`
says which of dcgm-exporter's fields each metric's points are, and in which unit.

Lean by default: a metric is on by default (`enabled`) when it carries one of dcgm-exporter's
default counters (`dcgm_fields.DCGM_DEFAULT_COUNTERS`), or when it is the agent's own view of
the GPU (`nvidia.gpu.up`, one series per GPU carrying its health summary);
`dcgm_fields.default_reason` says which (a test holds the two together). Everything else is
opt-in, one metric at a time or all at once (the receiver's `metric_set: all`): the
per-process metrics too, whose series come and go with each process, and `hw.status`, the same
health summary as a series per state. The health summary still reads the inputs of its rules
(`HEALTH_INPUTS`) when their own metrics are off; they are then read, not emitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from otelgpu.pdata.model import MetricKind
from otelgpu.receivers.nvml.fields_parity import (
    ERROR_TYPE,
    HEALTH_REASON,
    HW_STATE,
    PARITY_ROWS,
)

# Datapoint attribute keys this catalog adds (semconv.py holds resource attributes only;
# ERROR_TYPE and HW_STATE are defined in fields_parity.py, which this module must not be
# imported by, and used by both).
GPU_TASK = "hw.gpu.task"  # hardware semantic conventions: general | encoder | decoder
XID_CODE = "nvidia.xid.code"  # the XID number, as an int
SENSOR_LOCATION = "hw.sensor_location"  # hardware conventions: gpu | memory
LIMIT_TYPE = "hw.limit_type"  # hardware conventions: high.critical | high.degraded | max | ...
IO_DIRECTION = "network.io.direction"  # transmit | receive

GAUGE = MetricKind.GAUGE
SUM = MetricKind.SUM


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric the receiver can emit, with everything docs and exporters need to know."""

    name: str
    unit: str
    kind: MetricKind
    monotonic: bool
    description: str
    enabled: bool
    source: str
    dcgm: str
    attributes: tuple[str, ...] = ()
    also: tuple[str, ...] = ()  # further `<how>:<what>` sources of the same metric
    # Points are doubles even where NVML answers an integer (the conventions' value type).
    double: bool = False

    @property
    def source_kind(self) -> str:
        """The part of `source` before the colon (`field`, `call`, `gpm`, ...)."""
        return self.source.partition(":")[0]

    @property
    def source_name(self) -> str:
        """The part of `source` after the colon (the NVML field, call or GPM metric)."""
        return self.source.partition(":")[2]

    @property
    def sources(self) -> tuple[str, ...]:
        """`source` and the `also` sources."""
        return (self.source, *self.also)


def _gauge(
    name: str,
    unit: str,
    source: str,
    dcgm: str,
    description: str,
    enabled: bool = True,
    attributes: tuple[str, ...] = (),
    also: tuple[str, ...] = (),
    double: bool = False,
) -> MetricSpec:
    return MetricSpec(
        name, unit, GAUGE, False, description, enabled, source, dcgm, attributes, also, double
    )


def _counter(
    name: str,
    unit: str,
    source: str,
    dcgm: str,
    description: str,
    attributes: tuple[str, ...] = (),
    enabled: bool = True,
) -> MetricSpec:
    return MetricSpec(name, unit, SUM, True, description, enabled, source, dcgm, attributes)


def _updown(
    name: str,
    unit: str,
    source: str,
    dcgm: str,
    description: str,
    attributes: tuple[str, ...] = (),
    enabled: bool = True,
) -> MetricSpec:
    """A non-monotonic sum (an OTel UpDownCounter): a level, such as memory in use."""
    return MetricSpec(name, unit, SUM, False, description, enabled, source, dcgm, attributes)


# The readings the health summary's rules use (health.py): read whenever `nvidia.gpu.up` or
# `hw.status` (the metrics carrying the summary) is on, emitted only when their own metric is on.
HEALTH_METRICS: frozenset[str] = frozenset({"nvidia.gpu.up", "hw.status"})
HEALTH_INPUTS: frozenset[str] = frozenset(
    {
        "hw.gpu.utilization",
        "nvidia.gpu.xid.errors",
        "nvidia.gpu.memory.row_remap.failure",
        "nvidia.gpu.memory.row_remap.pending",
        "nvidia.gpu.memory.retired_pages.pending",
        "nvidia.gpu.clock.event.active",
        "nvidia.gpu.pcie.link.width",
        "nvidia.gpu.pcie.link.generation",
        "nvidia.gpu.nvlink.state",
    }
)
CATALOG: tuple[MetricSpec, ...] = (
    _gauge(
        "nvidia.gpu.up", "{state}", "agent:health", "",
        "1 while the GPU answers NVML, 0 once it is lost (NVML_ERROR_GPU_IS_LOST); hw.state is "
        "its health summary (ok, degraded, failed) and nvidia.gpu.health.reason says why "
        "(docs/migrating-from-dcgm-exporter.md, GPU health rules).",
        attributes=(HW_STATE, HEALTH_REASON),
    ),
    _updown(
        "hw.status", "1", "agent:health", "",
        "GPU health summary as the hardware conventions have it, a series per hw.state: 1 for "
        "the state the GPU is in (ok, degraded, failed) and 0 for the others; "
        "nvidia.gpu.health.reason lists why (the same summary nvidia.gpu.up carries).",
        (HW_STATE, HEALTH_REASON),
        enabled=False,
    ),
    _gauge(
        "hw.gpu.utilization", "1", "call:nvmlDeviceGetUtilizationRates", "",
        "Fraction of time the GPU spent on a task (0..1): hw.gpu.task is general (one or more "
        "kernels running), encoder or decoder (the video engines).",
        attributes=(GPU_TASK,),
        also=("call:nvmlDeviceGetEncoderUtilization", "call:nvmlDeviceGetDecoderUtilization"),
    ),
    _gauge(
        "hw.gpu.memory.utilization", "1", "call:nvmlDeviceGetMemoryInfo", "",
        "Fraction of GPU memory used (used / total, 0..1).", enabled=False,
    ),
    _gauge(
        "nvidia.gpu.memory.busy", "1", "call:nvmlDeviceGetUtilizationRates",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Fraction of time device memory was being read or written (0..1; NVML's memory "
        "utilization rate).",
    ),
    _updown(
        "hw.gpu.memory.usage", "By", "call:nvmlDeviceGetMemoryInfo", "DCGM_FI_DEV_FB_USED",
        "GPU memory in use.",
    ),
    _gauge(
        "nvidia.gpu.memory.free", "By", "call:nvmlDeviceGetMemoryInfo", "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free.",
    ),
    _gauge(
        "nvidia.gpu.memory.reserved", "By", "call:nvmlDeviceGetMemoryInfo",
        "DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved by the driver and firmware.",
    ),
    _updown(
        "hw.gpu.memory.limit", "By", "call:nvmlDeviceGetMemoryInfo", "DCGM_FI_DEV_FB_TOTAL",
        "Size of the GPU memory.", enabled=False,
    ),
    _gauge(
        "nvidia.gpu.sm.clock", "Hz", "call:nvmlDeviceGetClockInfo", "DCGM_FI_DEV_SM_CLOCK",
        "Current SM clock frequency.",
    ),
    _gauge(
        "nvidia.gpu.memory.clock", "Hz", "call:nvmlDeviceGetClockInfo", "DCGM_FI_DEV_MEM_CLOCK",
        "Current memory clock frequency.",
    ),
    _gauge(
        "hw.temperature", "Cel", "call:nvmlDeviceGetTemperature", "",
        "Temperature: hw.sensor_location is gpu (the GPU core) or memory (device memory, HBM); "
        "a double, as the conventions have it (NVML answers whole degrees).",
        attributes=(SENSOR_LOCATION,), also=("field:NVML_FI_DEV_MEMORY_TEMP",), double=True,
    ),
    _gauge(
        "hw.temperature.limit", "Cel", "call:nvmlDeviceGetTemperatureThreshold", "",
        "The GPU's own temperature limits, as the board answers them (read once per GPU): "
        "hw.limit_type is high.critical (it shuts down), high.degraded (hardware slowdown) or "
        "max (its maximum operating temperature, above which it may run below base clocks); "
        "hw.sensor_location is gpu. Hopper boards may answer none (nvidia.gpu.temperature.margin "
        "has their headroom).",
        enabled=False, attributes=(SENSOR_LOCATION, LIMIT_TYPE), double=True,
    ),
    _gauge(
        "nvidia.gpu.temperature.margin", "Cel", "call:nvmlDeviceGetMarginTemperature",
        "DCGM_FI_DEV_GPU_TEMP_LIMIT",
        "Degrees the GPU is below its T.Limit, the temperature it is designed to run up to "
        "(nvidia-smi's GPU T.Limit Temp): positive while below, 0 at it, negative past it.",
        enabled=False,
    ),
    _gauge(
        "hw.power", "W", "field:NVML_FI_DEV_POWER_INSTANT", "DCGM_FI_DEV_POWER_USAGE",
        "Current power draw of the GPU (nvmlDeviceGetPowerUsage on drivers without the field).",
    ),
    _gauge(
        "nvidia.gpu.power.limit", "W", "field:NVML_FI_DEV_POWER_CURRENT_LIMIT",
        "DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit in force.", enabled=False,
    ),
    _counter(
        "hw.energy", "J", "field:NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Energy used since the driver was last loaded.",
    ),
    _counter(
        "nvidia.gpu.pcie.replay", "{replay}", "field:NVML_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "PCIe replays (link-level retransmissions).",
    ),
    _gauge(
        "nvidia.gpu.pcie.tx.throughput", "By/s", "gpm:NVML_GPM_METRIC_PCIE_TX_PER_SEC",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "PCIe bytes sent per second, averaged over the collection interval (GPM, whole GPUs); "
        "before Hopper, or where GPM refuses it, a 20 ms sample of nvmlDeviceGetPcieThroughput.",
    ),
    _gauge(
        "nvidia.gpu.pcie.rx.throughput", "By/s", "gpm:NVML_GPM_METRIC_PCIE_RX_PER_SEC",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "PCIe bytes received per second, averaged over the collection interval (GPM, whole "
        "GPUs); before Hopper, or where GPM refuses it, a 20 ms sample of "
        "nvmlDeviceGetPcieThroughput.",
    ),
    _counter(
        "nvidia.gpu.nvlink.io", "By",
        "field:NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,"
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "NVLink data bytes sent and received, all links (nvidia.gpu.nvlink.io.by_direction "
        "has each direction).",
    ),
    _counter(
        "nvidia.gpu.nvlink.io.by_direction", "By",
        "field:NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,"
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
        "",
        "NVLink data bytes, all links: network.io.direction is transmit or receive "
        "(nvidia.gpu.nvlink.io is their sum).",
        (IO_DIRECTION,),
        enabled=False,
    ),
    _counter(
        "nvidia.gpu.xid.errors", "{error}", "event:nvmlEventTypeXidCriticalError",
        "DCGM_FI_DEV_XID_ERRORS", "XID errors reported by the driver, per XID code.",
        (XID_CODE,),
    ),
    _counter(
        "hw.errors", "{error}", "field:NVML_FI_DEV_ECC_SBE_VOL_TOTAL,NVML_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "Volatile ECC errors since the driver loaded; error.type is corrected "
        "(single-bit) or uncorrected (double-bit).",
        (ERROR_TYPE,), enabled=False,
    ),
    _counter(
        "nvidia.gpu.memory.remapped_rows", "{row}",
        "field:NVML_FI_DEV_REMAPPED_COR,NVML_FI_DEV_REMAPPED_UNC",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Memory rows remapped; error.type is corrected (rows remapped after correctable "
        "errors) or uncorrected (after uncorrectable ones).",
        (ERROR_TYPE,),
    ),
    _gauge(
        "nvidia.gpu.memory.row_remap.failure", "{state}", "field:NVML_FI_DEV_REMAPPED_FAILURE",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", "1 if a row remapping failed (the GPU needs service).",
    ),
    _gauge(
        "nvidia.gpu.process.memory.usage", "By", "process:nvmlDeviceGetComputeRunningProcesses",
        "", "GPU memory used by one process (resource has process.pid and container.id); "
        "needs `processes: true`.", enabled=False,
    ),
    _gauge(
        "nvidia.gpu.process.utilization", "1", "process:nvmlDeviceGetProcessUtilization", "",
        "Fraction of the GPU one process used over the last sample period: hw.gpu.task is "
        "general (SMs), encoder or decoder. On a shared GPU this is each pod's real use; "
        "needs `processes: true`.",
        enabled=False, attributes=(GPU_TASK,),
    ),
    _gauge(
        "nvidia.gpu.process.memory.busy", "1", "process:nvmlDeviceGetProcessUtilization",
        "", "Fraction of time one process kept device memory busy (reads or writes) over the "
        "last sample period; needs `processes: true`.", enabled=False,
    ),
    _gauge(
        "nvidia.gpu.sm.active", "1", "gpm:NVML_GPM_METRIC_SM_UTIL", "DCGM_FI_PROF_SM_ACTIVE",
        "Fraction of SMs busy (GPM, Hopper and later).", enabled=False,
    ),
    _gauge(
        "nvidia.gpu.graphics.active", "1", "gpm:NVML_GPM_METRIC_GRAPHICS_UTIL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "Fraction of time the graphics/compute engine was active (GPM).",
    ),
    _gauge(
        "nvidia.gpu.tensor.active", "1", "gpm:NVML_GPM_METRIC_ANY_TENSOR_UTIL",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Fraction of time the tensor pipes were active (GPM).",
    ),
    _gauge(
        "nvidia.gpu.dram.active", "1", "gpm:NVML_GPM_METRIC_DRAM_BW_UTIL",
        "DCGM_FI_PROF_DRAM_ACTIVE", "Fraction of peak DRAM bandwidth used (GPM).",
    ),
    *(MetricSpec(*row) for row in PARITY_ROWS),  # fields_parity.py: dcgm-exporter parity
)  # fmt: skip

BY_NAME: Mapping[str, MetricSpec] = {spec.name: spec for spec in CATALOG}
DEFAULT_ENABLED: frozenset[str] = frozenset(s.name for s in CATALOG if s.enabled)
