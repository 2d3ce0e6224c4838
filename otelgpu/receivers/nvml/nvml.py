"""The NVML client the receiver talks to: a narrow Protocol (the real backend, over nvidia-ml-py,
is `real_nvml.RealNvml`).

The Protocol is cut at the NVML-call level (handles, field values, MIG enumeration, process
lists, events, GPM samples) so the simulated backend can stand in for the real library and
the receiver code under test is the production code. Every call blocks and is made from a
worker thread the receiver owns; failures raise `NvmlError` carrying NVML's return code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# NVML return codes the receiver reacts to (values as in nvml.h / pynvml).
SUCCESS = 0
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NOT_FOUND = 6
ERROR_DRIVER_NOT_LOADED = 9
ERROR_TIMEOUT = 10
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_NO_DATA = 21
ERROR_UNKNOWN = 999

# Codes meaning "this GPU can't give that", remembered rather than retried every cycle.
UNSUPPORTED_CODES = frozenset({ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND})

CLOCK_SM = 1
CLOCK_MEM = 2
PCIE_TX = 0
PCIE_RX = 1
# nvmlTemperatureThresholds_t: the limits `temperature_threshold` is asked for.
TEMPERATURE_THRESHOLD_SHUTDOWN = 0
TEMPERATURE_THRESHOLD_SLOWDOWN = 1
TEMPERATURE_THRESHOLD_MEM_MAX = 2
TEMPERATURE_THRESHOLD_GPU_MAX = 3

Handle = Any  # an opaque device handle (a ctypes pointer for the real library)


class NvmlError(Exception):
    """An NVML call failed; `code` is NVML's return code (NVML_ERROR_*)."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"NVML error {code}")
        self.code = code


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A MIG device found under a GPU."""

    handle: Handle
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    profile: str


@dataclass(frozen=True, slots=True)
class ProcessUtilization:
    """One process's latest `nvmlDeviceGetProcessUtilization` sample (percentages, 0..100)."""

    pid: int
    timestamp_us: int  # CPU time of the sample, microseconds
    sm: int
    memory: int
    encoder: int
    decoder: int


@dataclass(frozen=True, slots=True)
class FieldValue:
    """One entry of a `nvmlDeviceGetFieldValues` answer: its own return code and value."""

    field_id: int
    code: int
    value: int | float


class NvmlClient(Protocol):
    """The NVML calls the receiver makes. All block; all raise `NvmlError` on failure.

    `init` is called once before anything else (and again only after a failed `init`);
    handles returned by `device_handle` stay valid until `shutdown`. Utilizations are NVML's
    integer percentages, memory is bytes, clocks MHz, temperatures Celsius, PCIe KB/s.
    """

    def init(self) -> None:
        """Loads the library and initialises NVML (`nvmlInit_v2`)."""

    def shutdown(self) -> None:
        """Releases NVML (`nvmlShutdown`); never raises."""

    def driver_version(self) -> str:
        """`nvmlSystemGetDriverVersion`."""

    def device_count(self) -> int:
        """`nvmlDeviceGetCount_v2`."""

    def device_handle(self, index: int) -> Handle:
        """`nvmlDeviceGetHandleByIndex_v2`."""

    def uuid(self, handle: Handle) -> str:
        """`nvmlDeviceGetUUID` (works on GPU and MIG handles)."""

    def name(self, handle: Handle) -> str:
        """`nvmlDeviceGetName` (MIG handles answer "<model> MIG <profile>")."""

    def pci_bus_id(self, handle: Handle) -> str:
        """`nvmlDeviceGetPciInfo_v3().busId`."""

    def serial(self, handle: Handle) -> str:
        """`nvmlDeviceGetSerial` (NOT_SUPPORTED on many boards)."""

    def vbios_version(self, handle: Handle) -> str:
        """`nvmlDeviceGetVbiosVersion`."""

    def mig_instances(self, handle: Handle) -> list[MigInstance]:
        """The GPU's MIG devices (empty when MIG is off or unsupported)."""

    def minor_number(self, handle: Handle) -> int:
        """`nvmlDeviceGetMinorNumber`: N of /dev/nvidiaN (DRA names GPUs by it)."""

    def placement_start(self, handle: Handle, gpu_instance_id: int) -> int:
        """`nvmlGpuInstanceGetInfo(nvmlDeviceGetGpuInstanceById(gpu, id)).placement.start`:
        the first memory slice of a GPU instance of the GPU `handle`."""

    def field_values(self, handle: Handle, field_ids: Sequence[int]) -> list[FieldValue]:
        """`nvmlDeviceGetFieldValues`: one batched call; each entry carries its own code."""

    def utilization(self, handle: Handle) -> tuple[int, int]:
        """`nvmlDeviceGetUtilizationRates`: (gpu %, memory %)."""

    def encoder_utilization(self, handle: Handle) -> int:
        """`nvmlDeviceGetEncoderUtilization` %."""

    def decoder_utilization(self, handle: Handle) -> int:
        """`nvmlDeviceGetDecoderUtilization` %."""

    def memory_info(self, handle: Handle) -> tuple[int, int, int, int]:
        """`nvmlDeviceGetMemoryInfo` (v2 where available): (used, free, reserved, total) bytes."""

    def clock(self, handle: Handle, clock_type: int) -> int:
        """`nvmlDeviceGetClockInfo` MHz (`CLOCK_SM` or `CLOCK_MEM`)."""

    def temperature(self, handle: Handle) -> int:
        """`nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)` Celsius."""

    def temperature_threshold(self, handle: Handle, threshold: int) -> int:
        """`nvmlDeviceGetTemperatureThreshold` Celsius (`TEMPERATURE_THRESHOLD_*`); NvmlError
        (ERROR_NOT_SUPPORTED) for a threshold the board does not report."""

    def margin_temperature(self, handle: Handle) -> int:
        """`nvmlDeviceGetMarginTemperature` Celsius: how far the GPU is below its T.Limit
        (negative past it)."""

    def power_usage(self, handle: Handle) -> int:
        """`nvmlDeviceGetPowerUsage` mW (for drivers without NVML_FI_DEV_POWER_INSTANT)."""

    def pcie_throughput(self, handle: Handle, counter: int) -> int:
        """`nvmlDeviceGetPcieThroughput` KB/s (`PCIE_TX` or `PCIE_RX`, a 20 ms sample)."""

    def clock_event_reasons(self, handle: Handle) -> int:
        """`nvmlDeviceGetCurrentClocksEventReasons`: the bitmask (nvmlClocksEventReason*)."""

    def nvlink_state(self, handle: Handle, link: int) -> bool:
        """`nvmlDeviceGetNvLinkState`: whether `link` is active."""

    def nvlink_error_counter(self, handle: Handle, link: int, counter: int) -> int:
        """`nvmlDeviceGetNvLinkErrorCounter` (counter: NVML_NVLINK_ERROR_DL_*)."""

    def pcie_link(self, handle: Handle) -> tuple[int, int, int, int]:
        """`nvmlDeviceGet{Curr,Max}PcieLink{Generation,Width}`: (current gen, max gen,
        current width, max width)."""

    def vgpu_licensed(self, handle: Handle) -> bool:
        """`nvmlDeviceGetGridLicensableFeatures_v4`: whether an enabled feature is licensed;
        NvmlError(ERROR_NOT_SUPPORTED) where NVML reports no licensing (bare metal)."""

    def compute_processes(self, handle: Handle) -> list[tuple[int, int]]:
        """`nvmlDeviceGetComputeRunningProcesses`: (pid, used GPU memory bytes) pairs."""

    def process_utilization(self, handle: Handle, since_us: int) -> list[ProcessUtilization]:
        """`nvmlDeviceGetProcessUtilization`: each process's newest sample taken after
        `since_us` (an empty list when there is none)."""

    def gpm_supported(self, handle: Handle) -> bool:
        """`nvmlGpmQueryDeviceSupport`."""

    def gpm_sample_alloc(self) -> Any:
        """`nvmlGpmSampleAlloc`: a sample buffer, reused across cycles."""

    def gpm_sample_free(self, sample: Any) -> None:
        """`nvmlGpmSampleFree`."""

    def gpm_sample(self, handle: Handle, sample: Any) -> None:
        """`nvmlGpmSampleGet`: fills `sample` now."""

    def gpm_mig_sample(self, handle: Handle, gpu_instance_id: int, sample: Any) -> None:
        """`nvmlGpmMigSampleGet`: fills `sample` for one MIG GPU instance of GPU `handle`."""

    def gpm_metrics(
        self, first: Any, second: Any, metric_ids: Sequence[int]
    ) -> list[tuple[int, float]]:
        """`nvmlGpmMetricsGet` between two samples: (code, value %) per metric id."""

    def event_set_create(self) -> Any:
        """`nvmlEventSetCreate`."""

    def register_xid_events(self, handle: Handle, event_set: Any) -> None:
        """`nvmlDeviceRegisterEvents(nvmlEventTypeXidCriticalError)`."""

    def event_wait(self, event_set: Any, timeout_ms: int) -> tuple[Handle, int]:
        """`nvmlEventSetWait_v2`: (device handle, XID code); NvmlError(ERROR_TIMEOUT) if none."""

    def end_event_wait(self, event_set: Any) -> None:
        """Ends a wait on `event_set` in progress, and makes later ones return at once, where
        the backend can (the simulated and replayed ones): the XID watcher is stopping. NVML
        has no such call; its wait ends within its timeout. Never frees the set."""

    def event_set_free(self, event_set: Any) -> None:
        """`nvmlEventSetFree`."""
