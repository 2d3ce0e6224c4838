"""A simulated NVML: deterministic GPUs behind the same `NvmlClient` Protocol as the real one.

Readings are pure functions of (time since init, GPU index), so a demo looks alive and a test
with a hand-advanced clock knows every value. Faults are injected where real NVML shows them:
NOT_SUPPORTED per field or call, GPU_IS_LOST after `lost_after`, LIBRARY_NOT_FOUND on init,
XID errors through the event set. `calls` counts every call, so tests can prove what the
receiver did not retry.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import SimulatedConfig, SimulatedGpu
from otelgpu.receivers.nvml.nvml import FieldValue, MigInstance, NvmlError, ProcessUtilization
from otelgpu.receivers.nvml.simulated_parity import PARITY_GPM_WEIGHTS, ParitySimulation
from otelgpu.receivers.nvml.sources import FIELD_IDS, GPM_METRIC_IDS

_FIELD_NAMES = {v: k for k, v in FIELD_IDS.items()}
_GPM_NAMES = {v: k for k, v in GPM_METRIC_IDS.items()}
# Calls a MIG handle answers NOT_SUPPORTED to on real hardware.
_MIG_UNSUPPORTED = frozenset(
    {
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetEncoderUtilization",
        "nvmlDeviceGetDecoderUtilization",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetPowerUsage",
    }
)


@dataclass(frozen=True, slots=True)
class SimHandle:
    """A simulated device handle: a GPU index, and a MIG slot for MIG devices."""

    gpu: int
    mig: int = -1


@dataclass
class _Gpu:
    index: int
    spec: SimulatedGpu
    uuid: str
    unsupported: frozenset[str]
    processes: list[tuple[int, int]] = field(default_factory=list)


def _profile_memory(profile: str) -> int:
    # "1g.10gb" → 10 GiB; anything unparsable gets 10 GiB.
    size = profile.rpartition(".")[2].lower().removesuffix("gb")
    return int(float(size) * (1 << 30)) if size.replace(".", "").isdigit() else 10 << 30


def _reserved(total: int) -> int:
    """What the driver keeps for itself: NVML's used + free + reserved = total."""
    return total // 64


class SimulatedNvml(ParitySimulation):
    """`NvmlClient` over deterministic simulated GPUs."""

    def __init__(self, config: SimulatedConfig, clock: Callable[[], float]) -> None:
        self._config = config
        self._clock = clock
        self._t0 = 0.0
        self._init_attempts = 0
        self._gpus: list[_Gpu] = []
        self._events: deque[tuple[float, int, int]] = deque()
        self._wake = threading.Condition()
        self.calls: Counter[str] = Counter()
        self.field_requests: Counter[tuple[int, int]] = Counter()  # (gpu index, field id)

    # --- lifecycle ----------------------------------------------------------------------------

    def init(self) -> None:
        self.calls["nvmlInit"] += 1
        self._init_attempts += 1
        missing = self._config.library_missing
        if missing is True or (missing is not False and self._init_attempts <= missing):
            raise NvmlError(nvml.ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found")
        self._t0 = self._clock()
        shared = frozenset(self._config.unsupported_fields)
        self._gpus = [
            _Gpu(
                index=i,
                spec=spec,
                uuid=spec.uuid or f"GPU-5157a7e0-0000-4000-8000-{i:012x}",
                unsupported=shared | frozenset(spec.unsupported_fields),
                processes=[(p.pid, p.used_memory) for p in spec.processes],
            )
            for i, spec in enumerate(self._config.gpu_list())
        ]
        self._events = deque(
            sorted(
                (self._t0 + x.after, gpu.index, x.code)
                for gpu in self._gpus
                for x in gpu.spec.xid_errors
            )
        )

    def shutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1

    # --- test hooks ---------------------------------------------------------------------------

    def inject_xid(self, gpu: int, code: int) -> None:
        """Queues an XID error on GPU `gpu`, delivered by the next `event_wait`."""
        with self._wake:
            self._events.appendleft((self._clock(), gpu, code))
            self._wake.notify_all()

    def set_processes(self, gpu: int, processes: list[tuple[int, int]]) -> None:
        """Replaces GPU `gpu`'s process list ((pid, used bytes) pairs)."""
        self._gpus[gpu].processes = list(processes)

    # --- helpers ------------------------------------------------------------------------------

    def _elapsed(self) -> float:
        return self._clock() - self._t0

    def _gpu(self, handle: SimHandle, call: str) -> _Gpu:
        self.calls[call] += 1
        gpu = self._gpus[handle.gpu]
        lost_after = gpu.spec.lost_after
        if lost_after is not None and self._elapsed() >= lost_after:
            raise NvmlError(nvml.ERROR_GPU_IS_LOST, "GPU is lost")
        if call in gpu.unsupported or (handle.mig >= 0 and call in _MIG_UNSUPPORTED):
            raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "Not Supported")
        return gpu

    def _load(self, index: float) -> float:
        """A slow deterministic wave per GPU, 0.05..0.95 (phase shifted by index)."""
        phase = self._elapsed() / 120.0 + index * 0.37
        return 0.5 + 0.45 * math.sin(2 * math.pi * phase)

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
            total = _profile_memory(gpu.spec.mig[handle.mig].profile)
        else:
            total = gpu.spec.memory
        reserved = _reserved(total)
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

    def power_usage(self, handle: SimHandle) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetPowerUsage")
        return round((100 + 500 * self._load(gpu.index)) * 1000)

    def pcie_throughput(self, handle: SimHandle, counter: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetPcieThroughput")
        scale = 2_000_000 if counter == nvml.PCIE_TX else 5_000_000  # KB/s at full load
        return round(scale * self._load(gpu.index))

    def compute_processes(self, handle: SimHandle) -> list[tuple[int, int]]:
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        # As NVML: the GPU handle answers for every instance; a GPU's configured processes
        # run in its first MIG instance when it has any.
        if handle.mig < 0 or handle.mig == 0:
            return self._processes(gpu)
        return []

    def _processes(self, gpu: _Gpu) -> list[tuple[int, int]]:
        """The GPU's processes as NVML reports them: when together they ask for more memory
        than the device they run in can hold (its first MIG instance, if it has any; less what
        is reserved), each one's memory is scaled down in proportion, so they fit."""
        capacity = gpu.spec.memory - _reserved(gpu.spec.memory)
        if gpu.spec.mig:
            instance = _profile_memory(gpu.spec.mig[0].profile)
            capacity = min(capacity, instance - _reserved(instance))
        asked = sum(memory for _, memory in gpu.processes)
        if asked <= capacity:
            return list(gpu.processes)
        return [(pid, memory * capacity // asked) for pid, memory in gpu.processes]

    def process_utilization(self, handle: SimHandle, since_us: int) -> list[ProcessUtilization]:
        gpu = self._gpu(handle, "nvmlDeviceGetProcessUtilization")
        if handle.mig >= 0:  # as on real MIG instances
            raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "Not Supported")
        now_us = int(self._clock() * 1e6)
        if now_us <= since_us or not gpu.processes:
            return []
        # The GPU's load, split between its processes by the memory each one holds, so the
        # processes' shares add up to (at most) the GPU's own utilization.
        load = self._load(gpu.index)
        total = sum(used for _, used in gpu.processes) or len(gpu.processes)
        out = []
        for pid, used in gpu.processes:
            weight = (used or 1) / total if total else 0.0
            out.append(
                ProcessUtilization(
                    pid=pid,
                    timestamp_us=now_us,
                    sm=int(100 * load * weight),
                    memory=int(60 * load * weight),
                    encoder=int(10 * load * weight),
                    decoder=int(20 * load * weight),
                )
            )
        return out

    # --- GPM ----------------------------------------------------------------------------------

    def gpm_supported(self, handle: SimHandle) -> bool:
        gpu = self._gpu(handle, "nvmlGpmQueryDeviceSupport")
        return gpu.spec.gpm

    def gpm_sample_alloc(self) -> Any:
        self.calls["nvmlGpmSampleAlloc"] += 1
        return {"gpu": -1, "mig": -1, "t": 0.0}

    def gpm_sample_free(self, sample: Any) -> None:
        self.calls["nvmlGpmSampleFree"] += 1

    def gpm_sample(self, handle: SimHandle, sample: Any) -> None:
        gpu = self._gpu(handle, "nvmlGpmSampleGet")
        sample["gpu"], sample["mig"], sample["t"] = gpu.index, -1, self._elapsed()

    def gpm_mig_sample(self, handle: SimHandle, gpu_instance_id: int, sample: Any) -> None:
        gpu = self._gpu(handle, "nvmlGpmMigSampleGet")
        if not 1 <= gpu_instance_id <= len(gpu.spec.mig):
            raise NvmlError(nvml.ERROR_NOT_FOUND, "Not Found")
        sample["gpu"], sample["mig"], sample["t"] = gpu.index, gpu_instance_id, self._elapsed()

    def gpm_metrics(
        self, first: Any, second: Any, metric_ids: Sequence[int]
    ) -> list[tuple[int, float]]:
        self.calls["nvmlGpmMetricsGet"] += 1
        # As real NVML: both samples must have been taken, of one device (seen on an H100:
        # a never-filled first sample is NVML_ERROR_INVALID_ARGUMENT).
        if -1 in (first["gpu"], second["gpu"]) or first["gpu"] != second["gpu"]:
            raise NvmlError(nvml.ERROR_INVALID_ARGUMENT, "Invalid Argument")
        gpu = self._gpus[second["gpu"]]
        # A MIG instance runs its own share of the load: shifted so series differ.
        load = self._load(gpu.index + 0.1 * max(0, second["mig"]))
        weights = {1: 1.0, 2: 0.9, 5: 0.6, 10: 0.5, **PARITY_GPM_WEIGHTS}
        return [
            (nvml.ERROR_NOT_SUPPORTED, 0.0)
            if _GPM_NAMES.get(m, "") in gpu.unsupported
            else (nvml.SUCCESS, 100 * load * weights.get(m, 0.5))
            for m in metric_ids
        ]

    # --- events -------------------------------------------------------------------------------

    def event_set_create(self) -> Any:
        self.calls["nvmlEventSetCreate"] += 1
        return set()

    def register_xid_events(self, handle: SimHandle, event_set: Any) -> None:
        self._gpu(handle, "nvmlEventTypeXidCriticalError")
        event_set.add(handle.gpu)

    def event_wait(self, event_set: Any, timeout_ms: int) -> tuple[SimHandle, int]:
        self.calls["nvmlEventSetWait"] += 1
        with self._wake:
            event = self._due_event(event_set)
            if event is None:
                # Real time, capped short: a simulated GPU has no reason to make the
                # receiver's shutdown wait for a full NVML timeout.
                self._wake.wait(min(timeout_ms / 1000, 0.05))
                event = self._due_event(event_set)
        if event is None:
            raise NvmlError(nvml.ERROR_TIMEOUT, "Timeout")
        return SimHandle(event[0]), event[1]

    def _due_event(self, event_set: Any) -> tuple[int, int] | None:
        now = self._clock()
        for item in list(self._events):
            due, gpu, code = item
            if due <= now and gpu in event_set:
                self._events.remove(item)
                return gpu, code
        return None

    def event_set_free(self, event_set: Any) -> None:
        self.calls["nvmlEventSetFree"] += 1
