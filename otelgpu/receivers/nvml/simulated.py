"""A simulated NVML: deterministic GPUs behind the same `NvmlClient` Protocol as the real one.

Readings are pure functions of (time since init, GPU index), so a demo looks alive and a test
with a hand-advanced clock knows every value. Faults are injected where real NVML shows them:
NOT_SUPPORTED per field or call, GPU_IS_LOST after `lost_after`, LIBRARY_NOT_FOUND on init,
XID errors through the event set. `calls` counts every call, so tests can prove what the
receiver did not retry.

This module holds discovery and the device readings; the GPUs and the fault injection every
call goes through are in simulated_gpus.py, and one part per role beside it: processes
(simulated_processes.py), GPM (simulated_gpm.py), XID events (simulated_xid.py), the
dcgm-exporter parity readings (simulated_parity.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.nvml import FieldValue, MigInstance, NvmlError
from otelgpu.receivers.nvml.simulated_gpm import GpmSimulation
from otelgpu.receivers.nvml.simulated_gpus import SimHandle, profile_memory, reserved_memory
from otelgpu.receivers.nvml.simulated_parity import ParitySimulation
from otelgpu.receivers.nvml.simulated_processes import ProcessSimulation
from otelgpu.receivers.nvml.simulated_xid import XidSimulation
from otelgpu.receivers.nvml.sources import FIELD_IDS

__all__ = ["SimHandle", "SimulatedNvml"]

_FIELD_NAMES = {v: k for k, v in FIELD_IDS.items()}
# Temperature limits (°C) of a simulated board that answers them, as an A100 does: shutdown,
# slowdown, maximum operating (its T.Limit, which the margin is measured to).
_T_LIMIT = 85
_THRESHOLDS = {
    nvml.TEMPERATURE_THRESHOLD_SHUTDOWN: 92,
    nvml.TEMPERATURE_THRESHOLD_SLOWDOWN: 89,
    nvml.TEMPERATURE_THRESHOLD_GPU_MAX: _T_LIMIT,
}


def _t_limit_only(model: str) -> bool:
    """Whether a simulated board answers only the margin to its T.Limit, no absolute limit:
    Hopper and later, where nvidia-smi shows only T.Limit margins (docs/hardware/)."""
    return any(name in model for name in ("H100", "H200", "H800", "GH200", "B200", "B100"))


class SimulatedNvml(ProcessSimulation, GpmSimulation, XidSimulation, ParitySimulation):
    """`NvmlClient` over deterministic simulated GPUs."""

    # --- lifecycle ----------------------------------------------------------------------------

    def init(self) -> None:
        self.calls["nvmlInit"] += 1
        self._init_attempts += 1
        missing = self._config.library_missing
        if missing is True or (missing is not False and self._init_attempts <= missing):
            raise NvmlError(nvml.ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found")
        self.open_gpus()
        self.schedule_xids()

    def shutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1

    # --- discovery ----------------------------------------------------------------------------

    def driver_version(self) -> str:
        self.calls["nvmlSystemGetDriverVersion"] += 1
        return "550.54.15"

    def device_count(self) -> int:
        self.calls["nvmlDeviceGetCount"] += 1
        return len(self._gpus)

    def device_handle(self, index: int) -> SimHandle:
        if not 0 <= index < len(self._gpus):
            raise NvmlError(nvml.ERROR_NOT_FOUND, "Not Found")
        self._gpu(SimHandle(index), "nvmlDeviceGetHandleByIndex")
        return SimHandle(index)

    def uuid(self, handle: SimHandle) -> str:
        gpu = self._gpu(handle, "nvmlDeviceGetUUID")
        if handle.mig < 0:
            return gpu.uuid
        mig = gpu.spec.mig[handle.mig]
        return mig.uuid or f"MIG-5157a7e0-{gpu.index:04x}-4000-8000-{handle.mig:012x}"

    def name(self, handle: SimHandle) -> str:
        gpu = self._gpu(handle, "nvmlDeviceGetName")
        if handle.mig < 0:
            return gpu.spec.model
        return f"{gpu.spec.model} MIG {gpu.spec.mig[handle.mig].profile}"

    def pci_bus_id(self, handle: SimHandle) -> str:
        gpu = self._gpu(handle, "nvmlDeviceGetPciInfo")
        return f"00000000:{0x18 + gpu.index * 0x10:02X}:00.0"

    def serial(self, handle: SimHandle) -> str:
        gpu = self._gpu(handle, "nvmlDeviceGetSerial")
        return f"SIM{gpu.index:010d}"

    def vbios_version(self, handle: SimHandle) -> str:
        self._gpu(handle, "nvmlDeviceGetVbiosVersion")
        return "96.00.99.00.01"

    def mig_instances(self, handle: SimHandle) -> list[MigInstance]:
        gpu = self._gpu(handle, "nvmlDeviceGetMigDeviceHandleByIndex")
        found = []
        for slot, mig in enumerate(gpu.spec.mig):
            mig_handle = SimHandle(gpu.index, slot)
            found.append(MigInstance(mig_handle, self.uuid(mig_handle), slot + 1, 0, mig.profile))
        return found

    def minor_number(self, handle: SimHandle) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetMinorNumber")
        return gpu.index if gpu.spec.minor is None else gpu.spec.minor

    def placement_start(self, handle: SimHandle, gpu_instance_id: int) -> int:
        gpu = self._gpu(handle, "nvmlGpuInstanceGetInfo")
        start = 0
        for mig in gpu.spec.mig[: gpu_instance_id - 1]:  # GPU instance N is MIG slot N-1
            start += int(mig.profile.partition("g")[0] or 1)  # "2g.20gb" takes 2 slices
        mig = gpu.spec.mig[gpu_instance_id - 1]
        return start if mig.placement_start is None else mig.placement_start

    # --- readings -----------------------------------------------------------------------------

    def field_values(self, handle: SimHandle, field_ids: Sequence[int]) -> list[FieldValue]:
        gpu = self._gpu(handle, "nvmlDeviceGetFieldValues")
        out = []
        for field_id in field_ids:
            self.field_requests[(gpu.index, field_id)] += 1
            name = _FIELD_NAMES.get(field_id, "")
            if handle.mig >= 0 or name in gpu.unsupported or not name:
                out.append(FieldValue(field_id, nvml.ERROR_NOT_SUPPORTED, 0.0))
            else:
                out.append(FieldValue(field_id, nvml.SUCCESS, self._field(gpu.index, name)))
        return out

    def _field(self, index: int, name: str) -> int:
        t, load = self._elapsed(), self._load(index)
        values = {
            "NVML_FI_DEV_MEMORY_TEMP": 45 + 30 * load,
            "NVML_FI_DEV_POWER_INSTANT": (100 + 500 * load) * 1000,  # mW
            "NVML_FI_DEV_POWER_CURRENT_LIMIT": 700_000,
            "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 1e6 * index + t * 400_000,  # mJ
            "NVML_FI_DEV_PCIE_REPLAY_COUNTER": index + t // 100,
            "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX": (index + 1) * t * 1_000_000,  # KiB
            "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX": (index + 1) * t * 900_000,
            "NVML_FI_DEV_ECC_SBE_VOL_TOTAL": t // 50,
            "NVML_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
            "NVML_FI_DEV_REMAPPED_COR": index,
            "NVML_FI_DEV_REMAPPED_UNC": 0,
            "NVML_FI_DEV_REMAPPED_FAILURE": 0,
            **self.parity_fields(index, t, load),  # dcgm parity fields; test overrides last
        }
        return int(values[name])  # NVML answers these fields as integers

    def utilization(self, handle: SimHandle) -> tuple[int, int]:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        load = self._load(gpu.index)
        return round(100 * load), round(60 * load)

    def encoder_utilization(self, handle: SimHandle) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetEncoderUtilization")
        return round(10 * self._load(gpu.index))

    def decoder_utilization(self, handle: SimHandle) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetDecoderUtilization")
        return round(20 * self._load(gpu.index))

    def memory_info(self, handle: SimHandle) -> tuple[int, int, int, int]:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        if handle.mig >= 0:
            total = profile_memory(gpu.spec.mig[handle.mig].profile)
        else:
            total = gpu.spec.memory
        reserved = reserved_memory(total)
        used = int((total - reserved) * 0.8 * self._load(gpu.index))
        if handle.mig <= 0:  # the GPU, or the instance its processes run in (see below)
            # What its processes hold is part of what it uses: never less, however low the load.
            used = max(used, sum(memory for _, memory in self._processes(gpu)))
        return used, total - reserved - used, reserved, total

    def clock(self, handle: SimHandle, clock_type: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetClockInfo")
        if clock_type == nvml.CLOCK_MEM:
            return 2619
        return 345 + round(1635 * self._load(gpu.index))

    def temperature(self, handle: SimHandle) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTemperature")
        return 35 + round(40 * self._load(gpu.index))

    def temperature_threshold(self, handle: SimHandle, threshold: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTemperatureThreshold")
        limits = {} if _t_limit_only(gpu.spec.model) else _THRESHOLDS
        if threshold not in limits:
            raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "Not Supported")
        return limits[threshold]

    def margin_temperature(self, handle: SimHandle) -> int:
        self._gpu(handle, "nvmlDeviceGetMarginTemperature")
        return _T_LIMIT - self.temperature(handle)

    def power_usage(self, handle: SimHandle) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetPowerUsage")
        return round((100 + 500 * self._load(gpu.index)) * 1000)

    def pcie_throughput(self, handle: SimHandle, counter: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetPcieThroughput")
        scale = 2_000_000 if counter == nvml.PCIE_TX else 5_000_000  # KB/s at full load
        return round(scale * self._load(gpu.index))
