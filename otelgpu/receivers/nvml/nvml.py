"""The NVML client the receiver talks to: a narrow Protocol, and the real backend (nvidia-ml-py).

The Protocol is cut at the NVML-call level (handles, field values, MIG enumeration, process
lists, events, GPM samples) so the simulated backend can stand in for the real library and
the receiver code under test is the production code. Every call blocks and is made from a
worker thread the receiver owns; failures raise `NvmlError` carrying NVML's return code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# NVML return codes the receiver reacts to (values as in nvml.h / pynvml).
SUCCESS = 0
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

    def event_set_free(self, event_set: Any) -> None:
        """`nvmlEventSetFree`."""


class RealNvml:
    """`NvmlClient` over nvidia-ml-py. The module is imported on `init`, not at import time."""

    def __init__(self) -> None:
        self._nv: Any = None
        self._mismatch: Any = ()  # the binding's NVMLLibraryMismatchError, once loaded

    def _call(self, fn_name: str, *args: Any) -> Any:
        try:
            return getattr(self._nv, fn_name)(*args)
        except self._nv.NVMLError as exc:
            raise NvmlError(exc.value, str(exc)) from None
        except self._mismatch as exc:
            # nvidia-ml-py's unversioned wrappers (nvmlDeviceGetComputeRunningProcesses) raise
            # this, not an NVMLError, when the driver lacks the versioned entry point they
            # call: it is FUNCTION_NOT_FOUND, so the receiver stops asking instead of counting
            # an error every cycle.
            raise NvmlError(ERROR_FUNCTION_NOT_FOUND, f"{fn_name}: {exc}") from None

    def init(self) -> None:
        try:
            import pynvml
        except ImportError as exc:  # the binding itself is missing: same as no library
            raise NvmlError(ERROR_LIBRARY_NOT_FOUND, f"nvidia-ml-py not installed: {exc}") from None
        self._nv = pynvml
        self._mismatch = getattr(pynvml, "NVMLLibraryMismatchError", ())
        self._call("nvmlInit")

    def shutdown(self) -> None:
        if self._nv is not None:
            # Shutting down anyway: an error here has nothing left to recover.
            with contextlib.suppress(self._nv.NVMLError):
                self._nv.nvmlShutdown()

    def driver_version(self) -> str:
        return str(self._call("nvmlSystemGetDriverVersion"))

    def device_count(self) -> int:
        return int(self._call("nvmlDeviceGetCount"))

    def device_handle(self, index: int) -> Handle:
        return self._call("nvmlDeviceGetHandleByIndex", index)

    def uuid(self, handle: Handle) -> str:
        return str(self._call("nvmlDeviceGetUUID", handle))

    def name(self, handle: Handle) -> str:
        return str(self._call("nvmlDeviceGetName", handle))

    def pci_bus_id(self, handle: Handle) -> str:
        bus_id = self._call("nvmlDeviceGetPciInfo", handle).busId
        return bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)

    def serial(self, handle: Handle) -> str:
        return _text(self._call("nvmlDeviceGetSerial", handle))

    def vbios_version(self, handle: Handle) -> str:
        return _text(self._call("nvmlDeviceGetVbiosVersion", handle))

    def mig_instances(self, handle: Handle) -> list[MigInstance]:
        try:
            current, _pending = self._call("nvmlDeviceGetMigMode", handle)
        except NvmlError as exc:
            if exc.code in UNSUPPORTED_CODES:
                return []
            raise
        if current != self._nv.NVML_DEVICE_MIG_ENABLE:
            return []
        found = []
        for slot in range(int(self._call("nvmlDeviceGetMaxMigDeviceCount", handle))):
            try:
                mig = self._call("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
            except NvmlError as exc:
                if exc.code == ERROR_NOT_FOUND:  # an empty slot
                    continue
                raise
            found.append(self._mig(mig))
        return found

    def minor_number(self, handle: Handle) -> int:
        return int(self._call("nvmlDeviceGetMinorNumber", handle))

    def placement_start(self, handle: Handle, gpu_instance_id: int) -> int:
        instance = self._call("nvmlDeviceGetGpuInstanceById", handle, gpu_instance_id)
        return int(self._call("nvmlGpuInstanceGetInfo", instance).placement.start)

    def _mig(self, mig: Handle) -> MigInstance:
        name = self.name(mig)
        return MigInstance(
            handle=mig,
            uuid=self.uuid(mig),
            gpu_instance_id=int(self._call("nvmlDeviceGetGpuInstanceId", mig)),
            compute_instance_id=int(self._call("nvmlDeviceGetComputeInstanceId", mig)),
            profile=mig_profile(name),
        )

    def field_values(self, handle: Handle, field_ids: Sequence[int]) -> list[FieldValue]:
        raw = self._call("nvmlDeviceGetFieldValues", handle, list(field_ids))
        return [FieldValue(v.fieldId, v.nvmlReturn, _field_number(v)) for v in raw]

    def utilization(self, handle: Handle) -> tuple[int, int]:
        rates = self._call("nvmlDeviceGetUtilizationRates", handle)
        return int(rates.gpu), int(rates.memory)

    def encoder_utilization(self, handle: Handle) -> int:
        return int(self._call("nvmlDeviceGetEncoderUtilization", handle)[0])

    def decoder_utilization(self, handle: Handle) -> int:
        return int(self._call("nvmlDeviceGetDecoderUtilization", handle)[0])

    def memory_info(self, handle: Handle) -> tuple[int, int, int, int]:
        try:
            info = self._call("nvmlDeviceGetMemoryInfo", handle, self._nv.nvmlMemory_v2)
            reserved = int(info.reserved)
        except NvmlError as exc:  # drivers before v2: no reserved figure
            if exc.code not in UNSUPPORTED_CODES and exc.code != 25:  # 25: version mismatch
                raise
            info = self._call("nvmlDeviceGetMemoryInfo", handle)
            reserved = max(0, int(info.total) - int(info.used) - int(info.free))
        return int(info.used), int(info.free), reserved, int(info.total)

    def clock(self, handle: Handle, clock_type: int) -> int:
        return int(self._call("nvmlDeviceGetClockInfo", handle, clock_type))

    def temperature(self, handle: Handle) -> int:
        return int(self._call("nvmlDeviceGetTemperature", handle, 0))

    def power_usage(self, handle: Handle) -> int:
        return int(self._call("nvmlDeviceGetPowerUsage", handle))

    def pcie_throughput(self, handle: Handle, counter: int) -> int:
        return int(self._call("nvmlDeviceGetPcieThroughput", handle, counter))

    def clock_event_reasons(self, handle: Handle) -> int:
        return int(self._call("nvmlDeviceGetCurrentClocksEventReasons", handle))

    def nvlink_state(self, handle: Handle, link: int) -> bool:
        return bool(self._call("nvmlDeviceGetNvLinkState", handle, link))

    def nvlink_error_counter(self, handle: Handle, link: int, counter: int) -> int:
        return int(self._call("nvmlDeviceGetNvLinkErrorCounter", handle, link, counter))

    def pcie_link(self, handle: Handle) -> tuple[int, int, int, int]:
        return (
            int(self._call("nvmlDeviceGetCurrPcieLinkGeneration", handle)),
            int(self._call("nvmlDeviceGetMaxPcieLinkGeneration", handle)),
            int(self._call("nvmlDeviceGetCurrPcieLinkWidth", handle)),
            int(self._call("nvmlDeviceGetMaxPcieLinkWidth", handle)),
        )

    def vgpu_licensed(self, handle: Handle) -> bool:
        found = self._call("nvmlDeviceGetGridLicensableFeatures_v4", handle)
        if not found.isGridLicenseSupported:  # bare metal or passthrough: nothing to license
            raise NvmlError(ERROR_NOT_SUPPORTED, "no GRID licensing on this GPU")
        count = min(int(found.licensableFeaturesCount), len(found.gridLicensableFeatures))
        features = [found.gridLicensableFeatures[i] for i in range(count)]
        return any(f.featureEnabled and f.featureState for f in features)

    def compute_processes(self, handle: Handle) -> list[tuple[int, int]]:
        procs = self._call("nvmlDeviceGetComputeRunningProcesses", handle)
        # usedGpuMemory is None when the driver can't tell (no permission, MIG without CI).
        return [(int(p.pid), int(p.usedGpuMemory or 0)) for p in procs]

    def process_utilization(self, handle: Handle, since_us: int) -> list[ProcessUtilization]:
        try:
            samples = self._call("nvmlDeviceGetProcessUtilization", handle, since_us)
        except NvmlError as exc:
            # NOT_FOUND: no sample since `since_us`; the binding raises SUCCESS for "none at all".
            if exc.code in (ERROR_NOT_FOUND, 0):
                return []
            raise
        return newest_samples(
            ProcessUtilization(
                int(s.pid), int(s.timeStamp), int(s.smUtil), int(s.memUtil),
                int(s.encUtil), int(s.decUtil),
            )
            for s in samples
        )  # fmt: skip

    def gpm_supported(self, handle: Handle) -> bool:
        return bool(self._call("nvmlGpmQueryDeviceSupport", handle).isSupportedDevice)

    def gpm_sample_alloc(self) -> Any:
        return self._call("nvmlGpmSampleAlloc")

    def gpm_sample_free(self, sample: Any) -> None:
        self._call("nvmlGpmSampleFree", sample)

    def gpm_sample(self, handle: Handle, sample: Any) -> None:
        self._call("nvmlGpmSampleGet", handle, sample)

    def gpm_mig_sample(self, handle: Handle, gpu_instance_id: int, sample: Any) -> None:
        self._call("nvmlGpmMigSampleGet", handle, gpu_instance_id, sample)

    def gpm_metrics(
        self, first: Any, second: Any, metric_ids: Sequence[int]
    ) -> list[tuple[int, float]]:
        request = self._nv.c_nvmlGpmMetricsGet_t()
        request.version = self._nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(metric_ids)
        request.sample1, request.sample2 = first, second
        for slot, metric_id in enumerate(metric_ids):
            request.metrics[slot].metricId = metric_id
        self._call("nvmlGpmMetricsGet", request)
        return [
            (int(request.metrics[i].nvmlReturn), float(request.metrics[i].value))
            for i in range(len(metric_ids))
        ]

    def event_set_create(self) -> Any:
        return self._call("nvmlEventSetCreate")

    def register_xid_events(self, handle: Handle, event_set: Any) -> None:
        self._call(
            "nvmlDeviceRegisterEvents", handle, self._nv.nvmlEventTypeXidCriticalError, event_set
        )

    def event_wait(self, event_set: Any, timeout_ms: int) -> tuple[Handle, int]:
        data = self._call("nvmlEventSetWait_v2", event_set, timeout_ms)
        return data.device, int(data.eventData)

    def event_set_free(self, event_set: Any) -> None:
        self._call("nvmlEventSetFree", event_set)


def newest_samples(samples: Iterable[ProcessUtilization]) -> list[ProcessUtilization]:
    """One sample per pid, the newest (NVML may return several per process)."""
    newest: dict[int, ProcessUtilization] = {}
    for sample in samples:
        held = newest.get(sample.pid)
        if held is None or sample.timestamp_us >= held.timestamp_us:
            newest[sample.pid] = sample
    return list(newest.values())


def mig_profile(name: str) -> str:
    """ "NVIDIA H100 80GB HBM3 MIG 1g.10gb" → "1g.10gb" ("" when the name has no profile)."""
    _, sep, profile = name.rpartition(" MIG ")
    return profile.strip() if sep else ""


_VALUE_MEMBERS = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


def _field_number(value: Any) -> int | float:
    # The union member to read depends on valueType (NVML_VALUE_TYPE_*); 0 is a double.
    number = getattr(value.value, _VALUE_MEMBERS.get(int(value.valueType), "ullVal"))
    return float(number) if int(value.valueType) == 0 else int(number)


def _text(value: Any) -> str:
    """An NVML string answer (older pynvml releases return bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)
