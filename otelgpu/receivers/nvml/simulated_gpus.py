"""The simulated backend's GPUs: their handles, their state, and the one way every simulated
call reaches a GPU (`SimulatedGpus._gpu`), which counts the call and injects the faults real
NVML shows (GPU_IS_LOST after `lost_after`, NOT_SUPPORTED per call and on MIG handles).

`SimulatedNvml` (simulated.py) is built on it, with one part per role beside it: processes
(simulated_processes.py), GPM (simulated_gpm.py), XID events (simulated_xid.py) and the
dcgm-exporter parity readings (simulated_parity.py).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import SimulatedConfig, SimulatedGpu
from otelgpu.receivers.nvml.nvml import NvmlError

# Calls a MIG handle answers NOT_SUPPORTED to on real hardware.
MIG_UNSUPPORTED = frozenset(
    {
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetEncoderUtilization",
        "nvmlDeviceGetDecoderUtilization",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetTemperatureThreshold",
        "nvmlDeviceGetMarginTemperature",
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
class SimGpu:
    """One simulated GPU as its config made it, and what tests change on it."""

    index: int
    spec: SimulatedGpu
    uuid: str
    unsupported: frozenset[str]
    processes: list[tuple[int, int]] = field(default_factory=list)


def profile_memory(profile: str) -> int:
    """A MIG profile's memory: "1g.10gb" → 10 GiB; anything unparsable gets 10 GiB."""
    size = profile.rpartition(".")[2].lower().removesuffix("gb")
    return int(float(size) * (1 << 30)) if size.replace(".", "").isdigit() else 10 << 30


def reserved_memory(total: int) -> int:
    """What the driver keeps for itself: NVML's used + free + reserved = total."""
    return total // 64


class SimulatedGpus:
    """The GPUs of a `SimulatedConfig`, opened by `open_gpus` (NVML's init), on `clock`."""

    def __init__(self, config: SimulatedConfig, clock: Callable[[], float]) -> None:
        self._config = config
        self._clock = clock
        self._t0 = 0.0
        self._init_attempts = 0
        self._gpus: list[SimGpu] = []
        self.calls: Counter[str] = Counter()
        self.field_requests: Counter[tuple[int, int]] = Counter()  # (gpu index, field id)

    def open_gpus(self) -> None:
        """Builds the GPUs from the config; time starts now."""
        self._t0 = self._clock()
        shared = frozenset(self._config.unsupported_fields)
        self._gpus = [
            SimGpu(
                index=i,
                spec=spec,
                uuid=spec.uuid or f"GPU-5157a7e0-0000-4000-8000-{i:012x}",
                unsupported=shared | frozenset(spec.unsupported_fields),
                processes=[(p.pid, p.used_memory) for p in spec.processes],
            )
            for i, spec in enumerate(self._config.gpu_list())
        ]

    def _elapsed(self) -> float:
        return self._clock() - self._t0

    def _gpu(self, handle: SimHandle, call: str) -> SimGpu:
        self.calls[call] += 1
        gpu = self._gpus[handle.gpu]
        lost_after = gpu.spec.lost_after
        if lost_after is not None and self._elapsed() >= lost_after:
            raise NvmlError(nvml.ERROR_GPU_IS_LOST, "GPU is lost")
        if call in gpu.unsupported or (handle.mig >= 0 and call in MIG_UNSUPPORTED):
            raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "Not Supported")
        return gpu

    def _load(self, index: float) -> float:
        """A slow deterministic wave per GPU, 0.05..0.95 (phase shifted by index)."""
        phase = self._elapsed() / 120.0 + index * 0.37
        return 0.5 + 0.45 * math.sin(2 * math.pi * phase)
