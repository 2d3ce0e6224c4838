"""The real NVML backend: `NvmlClient` over nvidia-ml-py (`pynvml`, imported on `init`).

Kept apart from `nvml.py` (the Protocol, return codes and value types the simulated backend
shares) because only this module touches the binding.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any

from otelgpu.receivers.nvml.nvml import (
    ERROR_FUNCTION_NOT_FOUND,
    ERROR_LIBRARY_NOT_FOUND,
    ERROR_NOT_FOUND,
    ERROR_NOT_SUPPORTED,
    UNSUPPORTED_CODES,
    FieldValue,
    Handle,
    MigInstance,
    NvmlError,
    ProcessUtilization,
)


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

    def temperature_threshold(self, handle: Handle, threshold: int) -> int:
        return int(self._call("nvmlDeviceGetTemperatureThreshold", handle, threshold))

    def margin_temperature(self, handle: Handle) -> int:
        return int(self._call("nvmlDeviceGetMarginTemperature", handle))

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

    def end_event_wait(self, event_set: Any) -> None:
        """Nothing: NVML cannot end a wait early; `nvmlEventSetWait` returns within its
        timeout (the watcher's 500 ms), and the watcher's thread then sees it is stopping."""

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
