"""dcgm-exporter's default counters, as facts, and the `/metrics` body it serves for a node.

Facts, read from NVIDIA/dcgm-exporter (main branch; release 4.5.3-4.8.2):

- `etc/default-counters.csv`: the 25 fields it enables (`DCGM_FI_DRIVER_VERSION`, a label
  there, is rendered on every series instead), each one's Prometheus type, and the length of
  its help text. The texts themselves are not copied: each HELP line is as long as dcgm-exporter's
  and filled with its field's words, which gzip packs a little better than the real sentence
  (in dcgm-exporter's favour).
- `internal/pkg/rendermetrics/render_metrics.go`: per field `# HELP` and `# TYPE`, then one line
  per device: `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, on a MIG instance
  `GPU_I_PROFILE` and `GPU_I_ID`, `Hostname`, then its labels in key order
  (`DCGM_FI_DRIVER_VERSION`, and with the pod mapper `container`, `namespace`, `pod` for a held
  device), then the XID gauge's `err_code` and `err_msg` (`"0"`, `"No Error"` before any XID).
- `internal/pkg/collector/gpu_collector.go` (`toString`): DCGM's int64 fields print with `%d`,
  its doubles with `%f`; a blank value (a field the device does not answer) is skipped.

Values: `render` takes each device's readings in dcgm-exporter's units (`readings`: what the
agent read from the same GPU, so both sides carry the same numbers and gzip sees the same
entropy) and prints them as dcgm-exporter does; a field with no reading there (the XID gauge
and the vGPU licence before any XID or licence: 0; a caller that gives none) gets a plausible
busy-H100 reading, `_READING`.
- Answered per device: on a whole GPU every field (a bare-metal GPU answers the vGPU licence as
  0; the XID gauge is there from the start); on a MIG-enabled GPU each instance is a device and
  the GPU itself is not listed, and an instance answers every field but the four
  `DCGM_FI_DEV_*_UTIL` ones (dcgm-exporter issues 105 and 216: not supported under MIG).
- `/metrics` is served plain: dcgm-exporter does not gzip its answer.

Business labels: dcgm-exporter cannot read container env (it can add pod labels with
`--kubernetes-enable-pod-labels`); the same labels are rendered on its series too, so the
comparison never favours ours.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Counter:
    """One field of the default CSV."""

    field: str
    type: str  # the Prometheus type the CSV declares
    help_length: int  # characters of its help text
    double: bool = False  # DCGM_FT_DOUBLE (printed %f); otherwise int64 (%d)
    on_mig: bool = True  # answered on a MIG instance


DEFAULT_COUNTERS: tuple[Counter, ...] = (
    Counter("DCGM_FI_DEV_SM_CLOCK", "gauge", 28),
    Counter("DCGM_FI_DEV_MEM_CLOCK", "gauge", 32),
    Counter("DCGM_FI_DEV_MEMORY_TEMP", "gauge", 26),
    Counter("DCGM_FI_DEV_GPU_TEMP", "gauge", 23),
    Counter("DCGM_FI_DEV_POWER_USAGE", "gauge", 18, double=True),
    Counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 44),
    Counter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", 29),
    Counter("DCGM_FI_DEV_GPU_UTIL", "gauge", 23, on_mig=False),
    Counter("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", 26, on_mig=False),
    Counter("DCGM_FI_DEV_ENC_UTIL", "gauge", 27, on_mig=False),
    Counter("DCGM_FI_DEV_DEC_UTIL", "gauge", 27, on_mig=False),
    Counter("DCGM_FI_DEV_XID_ERRORS", "gauge", 40),
    Counter("DCGM_FI_DEV_FB_FREE", "gauge", 33),
    Counter("DCGM_FI_DEV_FB_USED", "gauge", 33),
    Counter("DCGM_FI_DEV_FB_RESERVED", "gauge", 37),
    Counter("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", 56),
    Counter("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", 19),
    Counter("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", 48),
    Counter("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", 46),
    Counter("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", 36),
    Counter("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", 44, double=True),
    Counter("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", 49, double=True),
    Counter("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", 80, double=True),
    Counter("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", 121),
    Counter("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", 118),
)

# A plausible reading of each field on a busy H100, for a field the caller has no reading of.
_READING: Mapping[str, float] = {
    "DCGM_FI_DEV_SM_CLOCK": 1980,
    "DCGM_FI_DEV_MEM_CLOCK": 2619,
    "DCGM_FI_DEV_MEMORY_TEMP": 41,
    "DCGM_FI_DEV_GPU_TEMP": 38,
    "DCGM_FI_DEV_POWER_USAGE": 412.317,
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 81234567890,
    "DCGM_FI_DEV_GPU_UTIL": 87,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 34,
    "DCGM_FI_DEV_FB_FREE": 51234,
    "DCGM_FI_DEV_FB_USED": 29490,
    "DCGM_FI_DEV_FB_RESERVED": 559,
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 912345678,
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.871234,
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.412345,
    "DCGM_FI_PROF_DRAM_ACTIVE": 0.563412,
    "DCGM_FI_PROF_PCIE_TX_BYTES": 123456789,
    "DCGM_FI_PROF_PCIE_RX_BYTES": 98765432,
}
_XID_LABELS = 'err_code="0",err_msg="No Error"'


@dataclass(frozen=True, slots=True)
class Device:
    """One device dcgm-exporter lists: a whole GPU, or one MIG instance of a GPU."""

    gpu: int  # the GPU's index
    uuid: str  # the GPU's UUID (on a MIG instance too)
    pci_bus_id: str
    model: str
    mig: tuple[str, str] | None = None  # (GPU_I_PROFILE, GPU_I_ID) on a MIG instance
    holder: tuple[str, str, str] | None = None  # (namespace, pod, container)
    labels: Mapping[str, str] | None = None  # business labels, rendered on its series too


def counters_of(device: Device) -> list[Counter]:
    """The default counters `device` answers."""
    return [c for c in DEFAULT_COUNTERS if c.on_mig or device.mig is None]


def _help(counter: Counter) -> str:
    words = counter.field.removeprefix("DCGM_FI_").lower().replace("_", " ")
    return ((words + " ") * (counter.help_length // (len(words) + 1) + 1))[: counter.help_length]


# (GPU UUID, GPU_I_ID or "") → field → the reading in dcgm-exporter's unit
Readings = Mapping[tuple[str, str], Mapping[str, float]]


def _value(counter: Counter, device: Device, readings: Readings) -> str:
    found = readings.get((device.uuid, device.mig[1] if device.mig else ""), {})
    reading = found.get(counter.field)
    if reading is None:
        reading = _READING.get(counter.field, 0) * (1 + device.gpu / 100)
    return f"{reading:f}" if counter.double else f"{round(reading):d}"


def _line(counter: Counter, device: Device, host: str, driver: str, readings: Readings) -> str:
    labels = [
        f'gpu="{device.gpu}"',
        f'UUID="{device.uuid}"',
        f'pci_bus_id="{device.pci_bus_id}"',
        f'device="nvidia{device.gpu}"',
        f'modelName="{device.model}"',
    ]
    if device.mig is not None:
        labels += [f'GPU_I_PROFILE="{device.mig[0]}"', f'GPU_I_ID="{device.mig[1]}"']
    labels.append(f'Hostname="{host}"')
    extra = {"DCGM_FI_DRIVER_VERSION": driver, **(device.labels or {})}
    if device.holder is not None:
        extra |= dict(zip(("namespace", "pod", "container"), device.holder, strict=True))
    labels += [f'{key}="{extra[key]}"' for key in sorted(extra)]
    if counter.field == "DCGM_FI_DEV_XID_ERRORS":
        labels.append(_XID_LABELS)
    return f"{counter.field}{{{','.join(labels)}}} {_value(counter, device, readings)}"


def render(
    devices: Iterable[Device], host: str, driver: str, readings: Readings | None = None
) -> tuple[bytes, int]:
    """The body dcgm-exporter serves for `devices` (with `readings` where given), and how many
    series it holds."""
    devices = list(devices)
    readings = readings or {}
    parts: list[str] = []
    series = 0
    for counter in DEFAULT_COUNTERS:
        lines = [
            _line(counter, d, host, driver, readings) for d in devices if counter in counters_of(d)
        ]
        if not lines:
            continue
        parts += [
            f"# HELP {counter.field} {_help(counter)}",
            f"# TYPE {counter.field} {counter.type}",
        ]
        parts += lines
        series += len(lines)
    return ("\n".join(parts) + "\n").encode(), series


def gzipped(body: bytes) -> bytes:
    """`body` gzipped as a scraper that asked for it would get it from a gzipping server."""
    return gzip.compress(body, compresslevel=1, mtime=0)
