"""How each catalog source is read from an `NvmlClient`, and converted to the catalog's unit.

`Plan.build(enabled)` turns the enabled catalog names into: one list of field IDs for the
batched `nvmlDeviceGetFieldValues` call, the dedicated calls still needed (`CallReader`), and
the GPM metric IDs. A test checks that every catalog source has exactly one way to be read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from otelgpu.pdata.model import Attributes
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.fields_parity import (
    ERROR_TYPE,
    PARITY_FIELD_IDS,
    PARITY_FIELD_POINTS,
    PARITY_GPM_IDS,
)
from otelgpu.receivers.nvml.limits import LIMIT_READERS
from otelgpu.receivers.nvml.metrics import (
    BY_NAME,
    GPU_TASK,
    IO_DIRECTION,
    SENSOR_LOCATION,
    MetricSpec,
)
from otelgpu.receivers.nvml.nvml import Handle, NvmlClient
from otelgpu.receivers.nvml.parity_reads import POINT_READERS, PointReader

# NVML field IDs (nvml.h NVML_FI_DEV_*) the catalog reads.
FIELD_IDS: Mapping[str, int] = {
    "NVML_FI_DEV_ECC_SBE_VOL_TOTAL": 3,
    "NVML_FI_DEV_ECC_DBE_VOL_TOTAL": 4,
    "NVML_FI_DEV_MEMORY_TEMP": 82,
    "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 83,
    "NVML_FI_DEV_PCIE_REPLAY_COUNTER": 94,
    "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX": 138,
    "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX": 139,
    "NVML_FI_DEV_REMAPPED_COR": 142,
    "NVML_FI_DEV_REMAPPED_UNC": 143,
    "NVML_FI_DEV_REMAPPED_FAILURE": 145,
    "NVML_FI_DEV_POWER_INSTANT": 186,
    "NVML_FI_DEV_POWER_CURRENT_LIMIT": 190,
    **PARITY_FIELD_IDS,
}
# NVML GPM metric IDs (NVML_GPM_METRIC_*).
GPM_METRIC_IDS: Mapping[str, int] = {
    "NVML_GPM_METRIC_GRAPHICS_UTIL": 1,
    "NVML_GPM_METRIC_SM_UTIL": 2,
    "NVML_GPM_METRIC_ANY_TENSOR_UTIL": 5,
    "NVML_GPM_METRIC_DRAM_BW_UTIL": 10,
    **PARITY_GPM_IDS,
}

NO_ATTRIBUTES: Attributes = {}

# field name → (attributes of its point, factor to the catalog unit). Fields not listed here
# are unit-for-unit. Attribute dicts are built once and shared by every point.
_FIELD_POINT: Mapping[str, tuple[Attributes, float]] = {
    "NVML_FI_DEV_ECC_SBE_VOL_TOTAL": ({ERROR_TYPE: "corrected"}, 1.0),
    "NVML_FI_DEV_ECC_DBE_VOL_TOTAL": ({ERROR_TYPE: "uncorrected"}, 1.0),
    "NVML_FI_DEV_MEMORY_TEMP": ({SENSOR_LOCATION: "memory"}, 1.0),
    "NVML_FI_DEV_REMAPPED_COR": ({ERROR_TYPE: "corrected"}, 1.0),
    "NVML_FI_DEV_REMAPPED_UNC": ({ERROR_TYPE: "uncorrected"}, 1.0),
    "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION": (NO_ATTRIBUTES, 1e-3),  # mJ → J
    "NVML_FI_DEV_POWER_INSTANT": (NO_ATTRIBUTES, 1e-3),  # mW → W
    "NVML_FI_DEV_POWER_CURRENT_LIMIT": (NO_ATTRIBUTES, 1e-3),  # mW → W
    "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX": ({IO_DIRECTION: "transmit"}, 1024),  # KiB → By
    "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX": ({IO_DIRECTION: "receive"}, 1024),
    **PARITY_FIELD_POINTS,
}


@dataclass(frozen=True, slots=True)
class FieldRead:
    """One field of the batched call: the metric it feeds, its point attributes, its scale.

    Several fields with the same metric and attributes add up into one point (NVLink TX+RX);
    a field several enabled metrics read is asked once and feeds each of them.
    """

    field_id: int
    name: str
    metric: str
    attributes: Attributes
    scale: float


@dataclass(frozen=True, slots=True)
class CallReader:
    """A dedicated NVML call feeding one or more metrics (values in `metrics` order).

    A reader with `fallback_for` is used only on devices where NVML refused that key (a field
    newer drivers batch, older ones answer only through a dedicated call), or, for a `gpm:`
    key, on whole GPUs that do not read it from GPM (see `WHOLE_GPU_GPM`).
    """

    key: str
    metrics: tuple[str, ...]
    read: Callable[[NvmlClient, Handle], tuple[int | float, ...]]
    fallback_for: str = ""
    attributes: tuple[Attributes, ...] = ()  # per metric, in `metrics` order (none: no attributes)

    def point_attributes(self) -> tuple[Attributes, ...]:
        """The attributes of each value's point, in `metrics` order."""
        return self.attributes or (NO_ATTRIBUTES,) * len(self.metrics)


def _utilization(c: NvmlClient, h: Handle) -> tuple[int | float, ...]:
    gpu, memory = c.utilization(h)
    return gpu / 100, memory / 100


def _memory(c: NvmlClient, h: Handle) -> tuple[int | float, ...]:
    used, free, reserved, total = c.memory_info(h)  # bytes, ints: they stay ints
    return used, free, reserved, total, (used / total if total else 0.0)


def _task(task: str) -> Attributes:
    return {GPU_TASK: task}


CALL_READERS: tuple[CallReader, ...] = (
    CallReader(
        "nvmlDeviceGetUtilizationRates",
        ("hw.gpu.utilization", "nvidia.gpu.memory.busy"),
        _utilization,
        attributes=(_task("general"), NO_ATTRIBUTES),
    ),
    CallReader(
        "nvmlDeviceGetEncoderUtilization",
        ("hw.gpu.utilization",),
        lambda c, h: (c.encoder_utilization(h) / 100,),
        attributes=(_task("encoder"),),
    ),
    CallReader(
        "nvmlDeviceGetDecoderUtilization",
        ("hw.gpu.utilization",),
        lambda c, h: (c.decoder_utilization(h) / 100,),
        attributes=(_task("decoder"),),
    ),
    CallReader(
        "nvmlDeviceGetMemoryInfo",
        (
            "hw.gpu.memory.usage",
            "nvidia.gpu.memory.free",
            "nvidia.gpu.memory.reserved",
            "hw.gpu.memory.limit",
            "hw.gpu.memory.utilization",
        ),
        _memory,
    ),
    CallReader(
        "nvmlDeviceGetClockInfo(SM)",
        ("nvidia.gpu.sm.clock",),
        lambda c, h: (c.clock(h, nvml.CLOCK_SM) * 1_000_000,),  # MHz → Hz, an int
    ),
    CallReader(
        "nvmlDeviceGetClockInfo(MEM)",
        ("nvidia.gpu.memory.clock",),
        lambda c, h: (c.clock(h, nvml.CLOCK_MEM) * 1_000_000,),
    ),
    CallReader(
        "nvmlDeviceGetTemperature",
        ("hw.temperature",),
        lambda c, h: (c.temperature(h),),
        attributes=({SENSOR_LOCATION: "gpu"},),
    ),
    CallReader(
        "nvmlDeviceGetMarginTemperature",
        ("nvidia.gpu.temperature.margin",),
        lambda c, h: (c.margin_temperature(h),),
    ),
    CallReader(
        "nvmlDeviceGetPowerUsage",
        ("hw.power",),
        lambda c, h: (c.power_usage(h) / 1000,),  # mW → W
        fallback_for=f"field:{FIELD_IDS['NVML_FI_DEV_POWER_INSTANT']}",
    ),
    # Each blocks through a 20 ms sample: only where GPM does not give the rate (WHOLE_GPU_GPM).
    CallReader(
        "nvmlDeviceGetPcieThroughput(TX)",
        ("nvidia.gpu.pcie.tx.throughput",),
        lambda c, h: (c.pcie_throughput(h, nvml.PCIE_TX) * 1000.0,),  # KB/s → By/s
        fallback_for="gpm:NVML_GPM_METRIC_PCIE_TX_PER_SEC",
    ),
    CallReader(
        "nvmlDeviceGetPcieThroughput(RX)",
        ("nvidia.gpu.pcie.rx.throughput",),
        lambda c, h: (c.pcie_throughput(h, nvml.PCIE_RX) * 1000.0,),
        fallback_for="gpm:NVML_GPM_METRIC_PCIE_RX_PER_SEC",
    ),
)

# GPM metrics only a whole GPU reads (a MIG instance has no PCIe link of its own). Their
# source was nvmlDeviceGetPcieThroughput, which sleeps through a 20 ms sample per direction
# (41.5 ms of a 49.8 ms cycle on an H100, per GPU): that call is now their fallback reader,
# used where GPM is absent (before Hopper) or refuses them.
WHOLE_GPU_GPM = frozenset({"nvidia.gpu.pcie.tx.throughput", "nvidia.gpu.pcie.rx.throughput"})

# Sources read outside the per-device plan: health, XID events, per-process memory.
OTHER_SOURCES = frozenset({"agent", "event", "process"})


def field_reads(spec: MetricSpec) -> list[FieldRead]:
    """The field reads behind a spec's `field:` sources (its main one and its `also`). A
    metric that declares no attributes gives its points none: its fields add up into one
    point (`nvidia.gpu.nvlink.io`, both directions)."""
    reads = []
    for source in spec.sources:
        how, _, what = source.partition(":")
        if how != "field":
            continue
        for name in what.split(","):
            attributes, scale = _FIELD_POINT.get(name, (NO_ATTRIBUTES, 1.0))
            if not spec.attributes:
                attributes = NO_ATTRIBUTES
            reads.append(FieldRead(FIELD_IDS[name], name, spec.name, attributes, scale))
    return reads


@dataclass(frozen=True, slots=True)
class Plan:
    """What one collection cycle reads, for the enabled metrics."""

    enabled: frozenset[str]
    fields: tuple[FieldRead, ...]
    calls: tuple[CallReader, ...]
    gpm: tuple[tuple[int, str, str], ...]  # (metric id, NVML name, catalog metric)
    points: tuple[PointReader, ...] = ()  # dedicated calls whose points carry attributes

    @classmethod
    def build(cls, enabled: frozenset[str]) -> Plan:
        """The reads needed for `enabled` (catalog names)."""
        specs = [BY_NAME[name] for name in sorted(enabled)]
        fields = tuple(r for s in specs for r in field_reads(s))
        calls = tuple(r for r in CALL_READERS if any(m in enabled for m in r.metrics))
        gpm = tuple(
            (GPM_METRIC_IDS[s.source_name], s.source_name, s.name)
            for s in specs
            if s.source_kind == "gpm"
        )
        points = tuple(
            r for r in (*POINT_READERS, *LIMIT_READERS) if any(m in enabled for m in r.metrics)
        )
        return cls(enabled, fields, calls, gpm, points)
