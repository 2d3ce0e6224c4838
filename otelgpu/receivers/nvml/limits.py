"""The GPU's own temperature limits (`hw.temperature.limit`), read once per GPU.

NVML answers each limit through `nvmlDeviceGetTemperatureThreshold(device, threshold)`. Which
thresholds a board answers differs by board: nvidia-smi shows an A100's or an L40S's shutdown,
slowdown and maximum operating temperatures; on Hopper it shows none of them, only margins to
the GPU's T.Limit (`nvidia.gpu.temperature.margin`), so these calls may be refused there
(`scripts/nvml_record` records what a board answers). Each threshold is its own call: one
refused (NOT_SUPPORTED, FUNCTION_NOT_FOUND) is remembered per device as
`nvmlDeviceGetTemperatureThreshold(<NAME>)` and never asked again, and when the board refuses
every one the whole reader is refused. The limits are facts of the board: the collector keeps
the first complete answer for as long as the device is open (`PointReader.static`); a failure of
another kind is counted and the limits are asked again next cycle.

The hardware conventions' `hw.limit_type` for each (`semconv_facts.yaml`):
- SHUTDOWN: `high.critical`: the GPU shuts down to protect itself;
- SLOWDOWN: `high.degraded`: hardware slowdown, the clocks are cut until it cools;
- GPU_MAX: `max`: its maximum operating temperature, above which it may run below its base
  clocks (nvidia-smi's "GPU Max Operating Temp").
The memory's maximum operating temperature (MEM_MAX) is not read: `hw.limit_type=max` would
then name two dcgm fields (DCGM_FI_DEV_GPU_MAX_OP_TEMP and DCGM_FI_DEV_MEM_MAX_OP_TEMP), which
the dcgm naming, one field per value of one attribute, cannot tell apart.
"""

from __future__ import annotations

from otelgpu.pdata.model import Attributes
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.devices import Device
from otelgpu.receivers.nvml.metrics import LIMIT_TYPE, SENSOR_LOCATION
from otelgpu.receivers.nvml.nvml import NvmlClient, NvmlError
from otelgpu.receivers.nvml.parity_reads import Point, PointReader

LIMIT = "hw.temperature.limit"
CALL = "nvmlDeviceGetTemperatureThreshold"

# (NVML_TEMPERATURE_THRESHOLD_* value, its name, the point's attributes)
THRESHOLDS: tuple[tuple[int, str, Attributes], ...] = (
    (nvml.TEMPERATURE_THRESHOLD_SHUTDOWN, "SHUTDOWN",
     {SENSOR_LOCATION: "gpu", LIMIT_TYPE: "high.critical"}),
    (nvml.TEMPERATURE_THRESHOLD_SLOWDOWN, "SLOWDOWN",
     {SENSOR_LOCATION: "gpu", LIMIT_TYPE: "high.degraded"}),
    (nvml.TEMPERATURE_THRESHOLD_GPU_MAX, "GPU_MAX", {SENSOR_LOCATION: "gpu", LIMIT_TYPE: "max"}),
)  # fmt: skip


def threshold_key(name: str) -> str:
    """How a refused threshold is remembered (and logged) per device."""
    return f"{CALL}({name})"


def _limits(client: NvmlClient, device: Device) -> list[Point]:
    points: list[Point] = []
    for threshold, name, attributes in THRESHOLDS:
        key = threshold_key(name)
        if key in device.unsupported:
            continue
        try:
            celsius = client.temperature_threshold(device.handle, threshold)
        except NvmlError as exc:
            if exc.code not in nvml.UNSUPPORTED_CODES:
                raise  # counted by the collector; the limits are asked again next cycle
            device.unsupported.add(key)
            continue
        points.append((LIMIT, attributes, celsius))
    keys = {threshold_key(name) for _, name, _ in THRESHOLDS}
    if keys <= device.unsupported:  # none at all: the call is refused, and logged, as one
        device.unsupported -= keys
        raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "no temperature threshold on this GPU")
    return points


LIMIT_READERS: tuple[PointReader, ...] = (PointReader(CALL, (LIMIT,), _limits, static=True),)
