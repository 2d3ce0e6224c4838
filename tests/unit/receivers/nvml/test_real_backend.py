"""`RealNvml` driven through a fake `pynvml`, so its code runs without a GPU.

The fake stands where nvidia-ml-py's module would (`sys.modules["pynvml"]`) and answers with
the installed binding's own ctypes structures (`c_nvmlFieldValue_t`, `c_nvmlMemory_v2_t`,
`c_nvmlEventData_t`, ...), so an attribute RealNvml reads that the real answer lacks fails
here too. Handles are real `c_nvmlDevice_t` pointers to made-up addresses, resolved by address:
NVML hands back a fresh pointer object for the same device (event data), never the same one.
Quirks of the binding the fake reproduces: `nvmlDeviceGetProcessUtilization` raises
`NVMLError(0)` when NVML has no samples at all; `nvmlDeviceGetMemoryInfo(h, version)` calls
the `_v2` entry point (which old drivers lack); `nvmlDeviceGetComputeRunningProcesses` raises
`NVMLLibraryMismatchError` (not an `NVMLError`) when the driver lacks `_v3`; `usedGpuMemory`
is None when the driver cannot tell.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any

import pynvml as real  # the installed binding: its structures give the fake the real shapes
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml import nvml, real_nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.nvml import (
    FieldValue,
    MigInstance,
    NvmlError,
    ProcessUtilization,
)
from otelgpu.receivers.nvml.real_nvml import RealNvml
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink
from tests.unit.receivers.nvml.conftest import PROCESS_METRICS_ON, by_attribute, by_id, value

GPU0 = 0x1000
GPU1 = 0x2000


class FakeNVMLError(Exception):
    """Shaped like `pynvml.NVMLError`: the return code in `.value`."""

    def __init__(self, value: int) -> None:
        super().__init__(f"fake NVML error {value}")
        self.value = value


class FakeLibraryMismatch(Exception):
    """`pynvml.NVMLLibraryMismatchError`: like the real one, not an `NVMLError`."""


def pointer(address: int, kind: Any = real.c_nvmlDevice_t) -> Any:
    """A fresh ctypes pointer object to `address` (never dereferenced)."""
    return ctypes.cast(ctypes.c_void_p(address), kind)


def address(ptr: Any) -> int:
    value = ctypes.cast(ptr, ctypes.c_void_p).value
    assert value is not None
    return value


@dataclass
class FakeDevice:
    uuid: str
    name: str
    bus_id: str = ""
    gpu_instance_id: int = 0
    compute_instance_id: int = 0
    minor: int = 0
    placement_start: int = 0  # of its GPU instance (MIG devices)
    mig_mode: int | None = 0  # None: nvmlDeviceGetMigMode answers NOT_SUPPORTED
    mig_slots: list[int | None] = field(default_factory=list)  # MIG handle per slot, None: empty
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    samples: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)
    clock_reasons: int = 0  # nvmlDeviceGetCurrentClocksEventReasons bitmask
    nvlinks: list[bool] = field(default_factory=list)  # active per link; none: no NVLink
    pcie: tuple[int, int, int, int] = (5, 5, 16, 16)  # current gen, max gen, width, max width
    grid: list[tuple[int, int]] | None = None  # licensable (enabled, state); None: bare metal


class FakePynvml(types.ModuleType):
    """The subset of nvidia-ml-py RealNvml calls, with the real signatures and return shapes.

    `fail[name] = code` makes the function `name` raise `NVMLError(code)`; `calls` records
    every call with its arguments (handles as addresses)."""

    NVMLError = FakeNVMLError
    NVMLLibraryMismatchError = FakeLibraryMismatch
    NVML_DEVICE_MIG_ENABLE = real.NVML_DEVICE_MIG_ENABLE
    NVML_GPM_METRICS_GET_VERSION = real.NVML_GPM_METRICS_GET_VERSION
    nvmlEventTypeXidCriticalError = real.nvmlEventTypeXidCriticalError
    nvmlMemory_v2 = real.nvmlMemory_v2
    c_nvmlGpmMetricsGet_t = real.c_nvmlGpmMetricsGet_t

    def __init__(self, devices: dict[int, FakeDevice]) -> None:
        super().__init__("pynvml")
        self.devices = devices
        self.fail: dict[str, int] = {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.field_answers: dict[int, tuple[int, int, int | float]] = {}  # id → code, type, value
        self.unsupported_gpm: set[int] = set()
        self.events: list[tuple[int, int]] = []  # (device address, XID code)
        self.lock = threading.Lock()

    def _enter(self, name: str, *args: Any) -> None:
        shown = tuple(address(a) if isinstance(a, ctypes._Pointer) else a for a in args)
        with self.lock:
            self.calls.append((name, shown))
        code = self.fail.get(name)
        if code is not None:
            raise FakeNVMLError(code)

    def called(self, name: str) -> list[tuple[Any, ...]]:
        with self.lock:
            return [args for called, args in self.calls if called == name]

    def _device(self, handle: Any) -> FakeDevice:
        try:
            return self.devices[address(handle)]
        except KeyError:
            raise FakeNVMLError(real.NVML_ERROR_INVALID_ARGUMENT) from None

    # --- library and identity -------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return sum(1 for a in self.devices if a % 0x1000 == 0)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._enter("nvmlDeviceGetHandleByIndex", index)
        return pointer(GPU0 + 0x1000 * index)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        self._enter("nvmlDeviceGetUUID", handle)
        return self._device(handle).uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        self._enter("nvmlDeviceGetName", handle)
        return self._device(handle).name

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        self._enter("nvmlDeviceGetPciInfo", handle)
        info = real.nvmlPciInfo_t()
        info.busId = self._device(handle).bus_id  # the structure stores bytes
        return info

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        self._enter("nvmlDeviceGetSerial", handle)
        return f"1650{address(handle):08d}"

    def nvmlDeviceGetVbiosVersion(self, handle: Any) -> str:
        self._enter("nvmlDeviceGetVbiosVersion", handle)
        return "96.00.89.00.01"

    # --- MIG --------------------------------------------------------------------------------

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        self._enter("nvmlDeviceGetMigMode", handle)
        mode = self._device(handle).mig_mode
        if mode is None:
            raise FakeNVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount", handle)
        return len(self._device(handle).mig_slots)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", handle, index)
        mig = self._device(handle).mig_slots[index]
        if mig is None:
            raise FakeNVMLError(real.NVML_ERROR_NOT_FOUND)
        return pointer(mig)

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId", handle)
        return self._device(handle).gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId", handle)
        return self._device(handle).compute_instance_id

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetMinorNumber", handle)
        return self._device(handle).minor

    def nvmlDeviceGetGpuInstanceById(self, handle: Any, gpu_instance_id: int) -> Any:
        self._enter("nvmlDeviceGetGpuInstanceById", handle, gpu_instance_id)
        for mig in self._device(handle).mig_slots:
            if mig is not None and self.devices[mig].gpu_instance_id == gpu_instance_id:
                return mig  # the GPU instance stands for itself by its MIG device's address
        raise FakeNVMLError(real.NVML_ERROR_NOT_FOUND)

    def nvmlGpuInstanceGetInfo(self, instance: int) -> Any:
        self._enter("nvmlGpuInstanceGetInfo", instance)
        info = real.c_nvmlGpuInstanceInfo_t()
        info.placement.start = self.devices[instance].placement_start
        return info

    # --- readings ---------------------------------------------------------------------------

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list[int]) -> Any:
        self._enter("nvmlDeviceGetFieldValues", handle, list(field_ids))
        values = (real.c_nvmlFieldValue_t * len(field_ids))()
        for slot, field_id in enumerate(field_ids):
            code, value_type, number = self.field_answers.get(
                field_id, (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, field_id)
            )
            values[slot].fieldId = field_id
            values[slot].nvmlReturn = code
            values[slot].valueType = value_type
            member = real_nvml._VALUE_MEMBERS.get(value_type, "ullVal")
            setattr(values[slot].value, member, number)
        return values

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates", handle)
        rates = real.c_nvmlUtilization_t()
        rates.gpu, rates.memory = 42, 17
        return rates

    def nvmlDeviceGetEncoderUtilization(self, handle: Any) -> list[int]:
        self._enter("nvmlDeviceGetEncoderUtilization", handle)
        return [7, 167000]  # [utilization %, sampling period µs]

    def nvmlDeviceGetDecoderUtilization(self, handle: Any) -> list[int]:
        self._enter("nvmlDeviceGetDecoderUtilization", handle)
        return [9, 167000]

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        if not version:
            self._enter("nvmlDeviceGetMemoryInfo", handle)
            v1 = real.c_nvmlMemory_t()
            # v1's used counts what v2 reports apart as reserved: total = used + free.
            v1.total, v1.free, v1.used = 80_000, 30_000, 50_000
            return v1
        # The binding calls a different entry point for v2; old drivers lack it.
        self._enter("nvmlDeviceGetMemoryInfo_v2", handle, version)
        v2 = real.c_nvmlMemory_v2_t()
        v2.version, v2.total, v2.reserved, v2.free, v2.used = version, 80_000, 600, 30_000, 49_400
        return v2

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        self._enter("nvmlDeviceGetClockInfo", handle, clock_type)
        return {real.NVML_CLOCK_SM: 1980, real.NVML_CLOCK_MEM: 2619}[clock_type]

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature", handle, sensor)
        return 61

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        self._enter("nvmlDeviceGetTemperatureThreshold", handle, threshold)
        limits = {real.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 92}
        if threshold not in limits:
            raise FakeNVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        return limits[threshold]

    def nvmlDeviceGetMarginTemperature(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetMarginTemperature", handle)
        return -2  # past its T.Limit: the binding reads a signed int

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetPowerUsage", handle)
        return 312_500

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: int) -> int:
        self._enter("nvmlDeviceGetPcieThroughput", handle, counter)
        return {real.NVML_PCIE_UTIL_TX_BYTES: 1200, real.NVML_PCIE_UTIL_RX_BYTES: 3400}[counter]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        try:
            self._enter("nvmlDeviceGetComputeRunningProcesses", handle)
        except FakeNVMLError as exc:
            # The binding's throwOnVersionMismatch turns FUNCTION_NOT_FOUND (no _v3) into this.
            if exc.value == real.NVML_ERROR_FUNCTION_NOT_FOUND:
                raise FakeLibraryMismatch("Unversioned function called ...") from None
            raise
        out = []
        for pid, used in self._device(handle).processes:
            info = real.c_nvmlProcessInfo_v2_t()
            info.pid, info.usedGpuMemory = pid, 0 if used is None else used
            friendly = real.nvmlStructToFriendlyObject(info)
            if used is None:  # how the binding reports "not available"
                friendly.usedGpuMemory = None
            out.append(friendly)
        return out

    def nvmlDeviceGetProcessUtilization(self, handle: Any, time_stamp: int) -> list[Any]:
        self._enter("nvmlDeviceGetProcessUtilization", handle, time_stamp)
        samples = self._device(handle).samples
        if not samples:  # NVML answered SUCCESS with no buffer: the binding raises NVMLError(0)
            raise FakeNVMLError(real.NVML_SUCCESS)
        newer = [s for s in samples if s[1] > time_stamp]
        if not newer:
            raise FakeNVMLError(real.NVML_ERROR_NOT_FOUND)
        out = (real.c_nvmlProcessUtilizationSample_t * len(newer))()
        for slot, (pid, ts, sm, mem, enc, dec) in enumerate(newer):
            s = out[slot]
            s.pid, s.timeStamp, s.smUtil, s.memUtil, s.encUtil, s.decUtil = (
                pid, ts, sm, mem, enc, dec,
            )  # fmt: skip
        return out[0 : len(newer)]

    # --- dcgm-exporter parity readings (parity_reads.py) --------------------------------------

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return self._device(handle).clock_reasons

    def _nvlink(self, handle: Any, link: int) -> bool:
        links = self._device(handle).nvlinks
        if not links:
            raise FakeNVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        if link >= len(links):
            raise FakeNVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        return links[link]

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkState", handle, link)
        return real.NVML_FEATURE_ENABLED if self._nvlink(handle, link) else 0

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int:
        self._enter("nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
        self._nvlink(handle, link)
        return 100 * link + counter

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkGeneration", handle)
        return self._device(handle).pcie[0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkGeneration", handle)
        return self._device(handle).pcie[1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkWidth", handle)
        return self._device(handle).pcie[2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkWidth", handle)
        return self._device(handle).pcie[3]

    def nvmlDeviceGetGridLicensableFeatures_v4(self, handle: Any) -> Any:
        self._enter("nvmlDeviceGetGridLicensableFeatures_v4", handle)
        answer = real.c_nvmlGridLicensableFeatures_v4_t()
        grid = self._device(handle).grid
        answer.isGridLicenseSupported = 0 if grid is None else 1
        answer.licensableFeaturesCount = len(grid or [])
        for slot, (enabled, state) in enumerate(grid or []):
            feature = answer.gridLicensableFeatures[slot]
            feature.featureCode = real.NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE
            feature.featureEnabled, feature.featureState = enabled, state
        return answer

    # --- GPM --------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:
        self._enter("nvmlGpmQueryDeviceSupport", handle)
        support = real.c_nvmlGpmSupport_t()
        support.version = real.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = 1 if address(handle) == GPU0 else 0
        return support

    def nvmlGpmSampleAlloc(self) -> Any:
        self._enter("nvmlGpmSampleAlloc")
        return pointer(
            0x9000 + 0x10 * len(self.called("nvmlGpmSampleAlloc")), real.c_nvmlGpmSample_t
        )

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self._enter("nvmlGpmSampleFree", sample)

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        self._enter("nvmlGpmSampleGet", handle, sample)
        return sample

    def nvmlGpmMigSampleGet(self, handle: Any, gpu_instance_id: int, sample: Any) -> Any:
        self._enter("nvmlGpmMigSampleGet", handle, gpu_instance_id, sample)
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        ids = [request.metrics[i].metricId for i in range(request.numMetrics)]
        self._enter(
            "nvmlGpmMetricsGet",
            request.version,
            address(request.sample1),
            address(request.sample2),
            ids,
        )
        for i, metric_id in enumerate(ids):
            unsupported = metric_id in self.unsupported_gpm
            request.metrics[i].nvmlReturn = (
                real.NVML_ERROR_NOT_SUPPORTED if unsupported else real.NVML_SUCCESS
            )
            request.metrics[i].value = 0.0 if unsupported else metric_id * 1.5
        return request

    # --- events -----------------------------------------------------------------------------

    def nvmlEventSetCreate(self) -> Any:
        self._enter("nvmlEventSetCreate")
        return pointer(0x7000, real.c_nvmlEventSet_t)

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:
        self._enter("nvmlDeviceRegisterEvents", handle, event_types, event_set)

    def nvmlEventSetWait_v2(self, event_set: Any, timeout_ms: int) -> Any:
        self._enter("nvmlEventSetWait_v2", event_set, timeout_ms)
        with self.lock:
            event = self.events.pop(0) if self.events else None
        if event is None:
            threading.Event().wait(min(timeout_ms, 20) / 1000)  # a short wait, as NVML blocks
            raise FakeNVMLError(real.NVML_ERROR_TIMEOUT)
        data = real.c_nvmlEventData_t()
        data.device = pointer(event[0])  # a new pointer object, as ctypes gives back
        data.eventType = real.nvmlEventTypeXidCriticalError
        data.eventData = event[1]
        return data

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._enter("nvmlEventSetFree", event_set)


def two_gpus() -> dict[int, FakeDevice]:
    """GPU 0 (H100) with MIG on, slot 1 empty; GPU 1 (A100) without MIG support."""
    return {
        GPU0: FakeDevice(
            "GPU-aaaa",
            "NVIDIA H100 80GB HBM3",
            "00000000:17:00.0",
            mig_mode=real.NVML_DEVICE_MIG_ENABLE,
            mig_slots=[GPU0 + 1, None, GPU0 + 3],
        ),
        GPU0 + 1: FakeDevice("MIG-1111", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", gpu_instance_id=9),
        GPU0 + 3: FakeDevice(
            "MIG-3333",
            "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
            gpu_instance_id=2,
            compute_instance_id=1,
        ),
        GPU1: FakeDevice("GPU-bbbb", "NVIDIA A100-SXM4-40GB", "00000000:65:00.0", mig_mode=None),
    }


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakePynvml:
    module = FakePynvml(two_gpus())
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


@pytest.fixture
def client(fake: FakePynvml) -> RealNvml:
    opened = RealNvml()
    opened.init()
    return opened


# --- library --------------------------------------------------------------------------------


def test_init_imports_the_binding_lazily_and_initialises(fake: FakePynvml) -> None:
    client = RealNvml()
    assert fake.calls == []  # nothing before init
    client.init()
    assert fake.called("nvmlInit") == [()]


def test_binding_not_installed_reads_as_library_not_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    client = RealNvml()
    with pytest.raises(NvmlError) as caught:
        client.init()
    assert caught.value.code == nvml.ERROR_LIBRARY_NOT_FOUND
    assert "nvidia-ml-py not installed" in str(caught.value)
    client.shutdown()  # nothing was loaded: shutdown is a no-op, not an AttributeError


def test_init_failure_carries_nvml_code(fake: FakePynvml) -> None:
    fake.fail["nvmlInit"] = real.NVML_ERROR_DRIVER_NOT_LOADED
    with pytest.raises(NvmlError) as caught:
        RealNvml().init()
    assert caught.value.code == nvml.ERROR_DRIVER_NOT_LOADED
    assert str(caught.value) == "fake NVML error 9"


def test_shutdown_calls_nvml_and_swallows_its_error(fake: FakePynvml, client: RealNvml) -> None:
    client.shutdown()
    fake.fail["nvmlShutdown"] = real.NVML_ERROR_UNINITIALIZED
    client.shutdown()  # must not raise
    assert len(fake.called("nvmlShutdown")) == 2


# --- identity ---------------------------------------------------------------------------------


def test_identity_calls(fake: FakePynvml, client: RealNvml) -> None:
    assert client.driver_version() == "550.54.15"
    assert client.device_count() == 2
    handle = client.device_handle(1)
    assert address(handle) == GPU1
    assert client.uuid(handle) == "GPU-bbbb"
    assert client.name(handle) == "NVIDIA A100-SXM4-40GB"
    assert client.pci_bus_id(handle) == "00000000:65:00.0"
    assert fake.called("nvmlDeviceGetHandleByIndex") == [(1,)]


@pytest.mark.parametrize(
    ("function", "call"),
    [
        ("nvmlSystemGetDriverVersion", lambda c, h: c.driver_version()),
        ("nvmlDeviceGetCount", lambda c, h: c.device_count()),
        ("nvmlDeviceGetHandleByIndex", lambda c, h: c.device_handle(0)),
        ("nvmlDeviceGetUUID", lambda c, h: c.uuid(h)),
        ("nvmlDeviceGetName", lambda c, h: c.name(h)),
        ("nvmlDeviceGetPciInfo", lambda c, h: c.pci_bus_id(h)),
        ("nvmlDeviceGetFieldValues", lambda c, h: c.field_values(h, [1])),
        ("nvmlDeviceGetUtilizationRates", lambda c, h: c.utilization(h)),
        ("nvmlDeviceGetEncoderUtilization", lambda c, h: c.encoder_utilization(h)),
        ("nvmlDeviceGetDecoderUtilization", lambda c, h: c.decoder_utilization(h)),
        ("nvmlDeviceGetClockInfo", lambda c, h: c.clock(h, nvml.CLOCK_SM)),
        ("nvmlDeviceGetTemperature", lambda c, h: c.temperature(h)),
        ("nvmlDeviceGetTemperatureThreshold", lambda c, h: c.temperature_threshold(h, 1)),
        ("nvmlDeviceGetMarginTemperature", lambda c, h: c.margin_temperature(h)),
        ("nvmlDeviceGetPowerUsage", lambda c, h: c.power_usage(h)),
        ("nvmlDeviceGetPcieThroughput", lambda c, h: c.pcie_throughput(h, nvml.PCIE_TX)),
        ("nvmlDeviceGetComputeRunningProcesses", lambda c, h: c.compute_processes(h)),
        ("nvmlGpmQueryDeviceSupport", lambda c, h: c.gpm_supported(h)),
        ("nvmlGpmSampleAlloc", lambda c, h: c.gpm_sample_alloc()),
        ("nvmlGpmSampleFree", lambda c, h: c.gpm_sample_free(None)),
        ("nvmlGpmSampleGet", lambda c, h: c.gpm_sample(h, None)),
        ("nvmlGpmMigSampleGet", lambda c, h: c.gpm_mig_sample(h, 1, None)),
        ("nvmlEventSetCreate", lambda c, h: c.event_set_create()),
        ("nvmlDeviceRegisterEvents", lambda c, h: c.register_xid_events(h, None)),
        ("nvmlEventSetWait_v2", lambda c, h: c.event_wait(None, 5)),
        ("nvmlEventSetFree", lambda c, h: c.event_set_free(None)),
    ],
)
def test_every_call_translates_nvml_errors(
    fake: FakePynvml, client: RealNvml, function: str, call: Any
) -> None:
    fake.fail[function] = real.NVML_ERROR_GPU_IS_LOST
    with pytest.raises(NvmlError) as caught:
        call(client, pointer(GPU0))
    assert caught.value.code == nvml.ERROR_GPU_IS_LOST
    assert str(caught.value) == "fake NVML error 15"
    assert caught.value.__cause__ is None  # raised `from None`: the binding's frames left out


# --- MIG ----------------------------------------------------------------------------------


def test_mig_instances_skip_empty_slots(fake: FakePynvml, client: RealNvml) -> None:
    found = client.mig_instances(pointer(GPU0))
    assert [(address(m.handle), m) for m in found] == [
        (GPU0 + 1, MigInstance(found[0].handle, "MIG-1111", 9, 0, "1g.10gb")),
        (GPU0 + 3, MigInstance(found[1].handle, "MIG-3333", 2, 1, "3g.40gb")),
    ]
    assert fake.called("nvmlDeviceGetMigDeviceHandleByIndex") == [(GPU0, 0), (GPU0, 1), (GPU0, 2)]


def test_mig_off_or_unsupported_is_no_instances(fake: FakePynvml, client: RealNvml) -> None:
    assert client.mig_instances(pointer(GPU1)) == []  # mig mode: NOT_SUPPORTED
    fake.devices[GPU0].mig_mode = real.NVML_DEVICE_MIG_DISABLE
    assert client.mig_instances(pointer(GPU0)) == []
    assert fake.called("nvmlDeviceGetMaxMigDeviceCount") == []
    fake.fail["nvmlDeviceGetMigMode"] = real.NVML_ERROR_FUNCTION_NOT_FOUND  # an old driver
    assert client.mig_instances(pointer(GPU0)) == []


def test_mig_errors_other_than_unsupported_or_empty_slot_raise(
    fake: FakePynvml, client: RealNvml
) -> None:
    fake.fail["nvmlDeviceGetMigMode"] = real.NVML_ERROR_GPU_IS_LOST
    with pytest.raises(NvmlError) as caught:
        client.mig_instances(pointer(GPU0))
    assert caught.value.code == nvml.ERROR_GPU_IS_LOST
    del fake.fail["nvmlDeviceGetMigMode"]
    fake.fail["nvmlDeviceGetMigDeviceHandleByIndex"] = real.NVML_ERROR_NO_PERMISSION
    with pytest.raises(NvmlError) as caught:
        client.mig_instances(pointer(GPU0))
    assert caught.value.code == real.NVML_ERROR_NO_PERMISSION


# --- readings ---------------------------------------------------------------------------------


def test_field_values_read_the_union_member_named_by_value_type(
    fake: FakePynvml, client: RealNvml
) -> None:
    fake.field_answers = {
        1: (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_DOUBLE, 2.5),
        2: (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_UNSIGNED_INT, 4_000_000_000),
        3: (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_UNSIGNED_LONG, 7),
        4: (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 2**63 + 5),
        5: (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_SIGNED_LONG_LONG, -(2**40)),
        6: (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_SIGNED_INT, -3),
        7: (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_UNSIGNED_SHORT, 65535),
        8: (real.NVML_ERROR_NOT_SUPPORTED, real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 0),
    }
    got = client.field_values(pointer(GPU0), range(1, 9))
    assert got == [
        FieldValue(1, 0, 2.5),
        FieldValue(2, 0, 4_000_000_000),
        FieldValue(3, 0, 7),
        FieldValue(4, 0, 2**63 + 5),
        FieldValue(5, 0, -(2**40)),
        FieldValue(6, 0, -3),
        FieldValue(7, 0, 65535),
        FieldValue(8, nvml.ERROR_NOT_SUPPORTED, 0),
    ]
    assert type(got[0].value) is float and type(got[1].value) is int
    assert fake.called("nvmlDeviceGetFieldValues") == [(GPU0, [1, 2, 3, 4, 5, 6, 7, 8])]


def test_simple_readings(fake: FakePynvml, client: RealNvml) -> None:
    h = pointer(GPU0)
    assert client.utilization(h) == (42, 17)
    assert client.encoder_utilization(h) == 7
    assert client.decoder_utilization(h) == 9
    assert client.clock(h, nvml.CLOCK_SM) == 1980
    assert client.clock(h, nvml.CLOCK_MEM) == 2619
    assert client.temperature(h) == 61
    assert client.power_usage(h) == 312_500
    assert client.pcie_throughput(h, nvml.PCIE_TX) == 1200
    assert client.pcie_throughput(h, nvml.PCIE_RX) == 3400
    assert fake.called("nvmlDeviceGetTemperature") == [(GPU0, real.NVML_TEMPERATURE_GPU)]
    assert fake.called("nvmlDeviceGetClockInfo") == [
        (GPU0, real.NVML_CLOCK_SM),
        (GPU0, real.NVML_CLOCK_MEM),
    ]


def test_temperature_limits_and_margin(fake: FakePynvml, client: RealNvml) -> None:
    h = pointer(GPU0)
    # the thresholds the receiver asks for, by the binding's own numbers
    assert (
        nvml.TEMPERATURE_THRESHOLD_SHUTDOWN,
        nvml.TEMPERATURE_THRESHOLD_SLOWDOWN,
        nvml.TEMPERATURE_THRESHOLD_MEM_MAX,
        nvml.TEMPERATURE_THRESHOLD_GPU_MAX,
    ) == (
        real.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
        real.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
        real.NVML_TEMPERATURE_THRESHOLD_MEM_MAX,
        real.NVML_TEMPERATURE_THRESHOLD_GPU_MAX,
    )
    assert client.temperature_threshold(h, nvml.TEMPERATURE_THRESHOLD_SHUTDOWN) == 92
    with pytest.raises(NvmlError) as refused:
        client.temperature_threshold(h, nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
    assert refused.value.code == nvml.ERROR_NOT_SUPPORTED
    assert client.margin_temperature(h) == -2
    assert fake.called("nvmlDeviceGetTemperatureThreshold") == [(GPU0, 0), (GPU0, 1)]


def test_memory_info_v2_gives_reserved(fake: FakePynvml, client: RealNvml) -> None:
    assert client.memory_info(pointer(GPU0)) == (49_400, 30_000, 600, 80_000)
    assert fake.called("nvmlDeviceGetMemoryInfo_v2") == [(GPU0, real.nvmlMemory_v2)]
    assert fake.called("nvmlDeviceGetMemoryInfo") == []


@pytest.mark.parametrize(
    "code",
    [
        real.NVML_ERROR_FUNCTION_NOT_FOUND,
        real.NVML_ERROR_NOT_SUPPORTED,
        real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    ],
)
def test_memory_info_falls_back_to_v1(fake: FakePynvml, client: RealNvml, code: int) -> None:
    fake.fail["nvmlDeviceGetMemoryInfo_v2"] = code
    # v1 has no reserved figure: it reads 0 and usage includes it (see the README).
    assert client.memory_info(pointer(GPU0)) == (50_000, 30_000, 0, 80_000)
    assert fake.called("nvmlDeviceGetMemoryInfo") == [(GPU0,)]


def test_memory_info_other_v2_errors_raise_without_fallback(
    fake: FakePynvml, client: RealNvml
) -> None:
    fake.fail["nvmlDeviceGetMemoryInfo_v2"] = real.NVML_ERROR_GPU_IS_LOST
    with pytest.raises(NvmlError) as caught:
        client.memory_info(pointer(GPU0))
    assert caught.value.code == nvml.ERROR_GPU_IS_LOST
    assert fake.called("nvmlDeviceGetMemoryInfo") == []


def test_compute_processes_used_memory_none_reads_zero(fake: FakePynvml, client: RealNvml) -> None:
    fake.devices[GPU0].processes = [(4242, 1 << 30), (77, None)]
    assert client.compute_processes(pointer(GPU0)) == [(4242, 1 << 30), (77, 0)]
    assert client.compute_processes(pointer(GPU1)) == []


def test_compute_processes_on_a_driver_without_v3_reads_as_function_not_found(
    fake: FakePynvml, client: RealNvml
) -> None:
    # nvidia-ml-py raises NVMLLibraryMismatchError (not an NVMLError) here; the client must
    # still answer NvmlError so the collector remembers the call as unsupported.
    fake.fail["nvmlDeviceGetComputeRunningProcesses"] = real.NVML_ERROR_FUNCTION_NOT_FOUND
    with pytest.raises(NvmlError) as caught:
        client.compute_processes(pointer(GPU0))
    assert caught.value.code == nvml.ERROR_FUNCTION_NOT_FOUND
    assert caught.value.code in nvml.UNSUPPORTED_CODES


def test_process_utilization_keeps_the_newest_sample_per_pid(
    fake: FakePynvml, client: RealNvml
) -> None:
    fake.devices[GPU0].samples = [
        (10, 1_000, 50, 20, 1, 2),
        (10, 3_000, 55, 22, 3, 4),
        (11, 2_000, 5, 6, 0, 0),
        (12, 500, 99, 99, 0, 0),  # older than `since`
    ]
    assert client.process_utilization(pointer(GPU0), 900) == [
        ProcessUtilization(10, 3_000, 55, 22, 3, 4),
        ProcessUtilization(11, 2_000, 5, 6, 0, 0),
    ]
    assert fake.called("nvmlDeviceGetProcessUtilization") == [(GPU0, 900)]


def test_process_utilization_no_samples_is_an_empty_list(
    fake: FakePynvml, client: RealNvml
) -> None:
    assert client.process_utilization(pointer(GPU0), 0) == []  # binding raises NVMLError(0)
    fake.devices[GPU0].samples = [(10, 1_000, 50, 20, 1, 2)]
    assert client.process_utilization(pointer(GPU0), 1_000) == []  # NOT_FOUND: none newer
    fake.fail["nvmlDeviceGetProcessUtilization"] = real.NVML_ERROR_NO_PERMISSION
    with pytest.raises(NvmlError) as caught:
        client.process_utilization(pointer(GPU0), 0)
    assert caught.value.code == real.NVML_ERROR_NO_PERMISSION


# --- GPM ----------------------------------------------------------------------------------


def test_gpm_support_and_samples(fake: FakePynvml, client: RealNvml) -> None:
    assert client.gpm_supported(pointer(GPU0)) is True
    assert client.gpm_supported(pointer(GPU1)) is False
    first, second = client.gpm_sample_alloc(), client.gpm_sample_alloc()
    client.gpm_sample(pointer(GPU0), first)
    client.gpm_mig_sample(pointer(GPU0), 9, second)
    client.gpm_sample_free(first)
    assert fake.called("nvmlGpmSampleGet") == [(GPU0, address(first))]
    assert fake.called("nvmlGpmMigSampleGet") == [(GPU0, 9, address(second))]
    assert fake.called("nvmlGpmSampleFree") == [(address(first),)]


def test_gpm_metrics_fills_a_real_request_and_reads_each_answer(
    fake: FakePynvml, client: RealNvml
) -> None:
    first, second = client.gpm_sample_alloc(), client.gpm_sample_alloc()
    fake.unsupported_gpm = {3}
    got = client.gpm_metrics(first, second, [1, 3, 10])
    assert got == [(0, 1.5), (nvml.ERROR_NOT_SUPPORTED, 0.0), (0, 15.0)]
    assert fake.called("nvmlGpmMetricsGet") == [
        (real.NVML_GPM_METRICS_GET_VERSION, address(first), address(second), [1, 3, 10])
    ]
    fake.fail["nvmlGpmMetricsGet"] = real.NVML_ERROR_INVALID_ARGUMENT
    with pytest.raises(NvmlError) as caught:
        client.gpm_metrics(first, second, [1])
    assert caught.value.code == real.NVML_ERROR_INVALID_ARGUMENT


# --- events -------------------------------------------------------------------------------


def test_xid_events_register_wait_and_free(fake: FakePynvml, client: RealNvml) -> None:
    event_set = client.event_set_create()
    client.register_xid_events(pointer(GPU1), event_set)
    assert fake.called("nvmlDeviceRegisterEvents") == [
        (GPU1, real.nvmlEventTypeXidCriticalError, 0x7000)
    ]
    fake.events.append((GPU1, 79))
    handle, code = client.event_wait(event_set, 500)
    assert (address(handle), code) == (GPU1, 79)
    assert client.uuid(handle) == "GPU-bbbb"  # a fresh pointer still names the GPU
    with pytest.raises(NvmlError) as caught:
        client.event_wait(event_set, 1)
    assert caught.value.code == nvml.ERROR_TIMEOUT
    client.event_set_free(event_set)
    assert fake.called("nvmlEventSetFree") == [(0x7000,)]


# --- the fake's quirks, checked against the installed binding -------------------------------
# The installed nvidia-ml-py runs here over a stand-in for libnvidia-ml (`pynvml.nvmlLib`),
# so what the fake above claims the binding does is what the binding does.


class CLib:
    """libnvidia-ml's C entry points, as `_nvmlGetFunctionPointer` looks them up (a missing
    attribute is a missing entry point: FUNCTION_NOT_FOUND)."""

    def nvmlInitWithFlags(self, flags: int) -> int:
        return int(real.NVML_SUCCESS)

    def nvmlDeviceGetProcessUtilization(self, *args: Any) -> int:
        return int(real.NVML_SUCCESS)  # no samples at all: NVML sizes nothing and succeeds


class CLibWithProcesses(CLib):
    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any, count: Any, procs: Any) -> int:
        if procs is None:  # the sizing call
            count._obj.value = 2
            return int(real.NVML_ERROR_INSUFFICIENT_SIZE)
        procs[0].pid, procs[0].usedGpuMemory = 5, 1 << 20
        procs[1].pid, procs[1].usedGpuMemory = 6, real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
        count._obj.value = 2
        return int(real.NVML_SUCCESS)


@pytest.fixture
def over_binding(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`use(clib)` → a RealNvml over the installed binding whose C library is `clib`."""
    monkeypatch.setitem(sys.modules, "pynvml", real)
    monkeypatch.setattr(real, "_nvmlGetFunctionPointer_cache", {})
    monkeypatch.setattr(real, "_nvmlLib_refcount", 0)

    def use(clib: CLib) -> RealNvml:
        monkeypatch.setattr(real, "nvmlLib", clib)
        client = RealNvml()
        client.init()
        return client

    return use


def test_binding_raises_nvml_error_zero_for_no_samples(over_binding: Any) -> None:
    client = over_binding(CLib())
    with pytest.raises(real.NVMLError) as caught:
        real.nvmlDeviceGetProcessUtilization(pointer(GPU0), 0)
    assert caught.value.value == real.NVML_SUCCESS  # what the fake's NVMLError(0) stands for
    assert client.process_utilization(pointer(GPU0), 0) == []


def test_binding_memory_v2_on_an_old_driver_is_function_not_found(over_binding: Any) -> None:
    client = over_binding(CLib())
    with pytest.raises(NvmlError) as caught:
        client.memory_info(pointer(GPU0))  # no _v2 and no v1 entry point in this CLib
    assert caught.value.code == nvml.ERROR_FUNCTION_NOT_FOUND
    with pytest.raises(real.NVMLError) as raw:
        real.nvmlDeviceGetMemoryInfo(pointer(GPU0), real.nvmlMemory_v2)
    assert raw.value.value == real.NVML_ERROR_FUNCTION_NOT_FOUND


def test_binding_without_processes_v3_raises_a_non_nvml_error(over_binding: Any) -> None:
    over_binding(CLib())
    with pytest.raises(real.NVMLLibraryMismatchError) as caught:
        real.nvmlDeviceGetComputeRunningProcesses(pointer(GPU0))
    assert not isinstance(caught.value, real.NVMLError)  # what FakeLibraryMismatch mirrors


def test_real_nvml_over_binding_without_processes_v3(over_binding: Any) -> None:
    client = over_binding(CLib())
    with pytest.raises(NvmlError) as caught:
        client.compute_processes(pointer(GPU0))
    assert caught.value.code == nvml.ERROR_FUNCTION_NOT_FOUND


def test_real_nvml_over_binding_used_memory_not_available(over_binding: Any) -> None:
    client = over_binding(CLibWithProcesses())
    assert client.compute_processes(pointer(GPU0)) == [(5, 1 << 20), (6, 0)]


class CLibWithTemperatureLimits(CLib):
    """A board that answers its slowdown limit and a margin past its T.Limit."""

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: Any, temp: Any) -> int:
        if threshold.value != real.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:  # the enum, by value
            return int(real.NVML_ERROR_NOT_SUPPORTED)
        temp._obj.value = 89
        return int(real.NVML_SUCCESS)

    def nvmlDeviceGetMarginTemperature(self, handle: Any, info: Any) -> int:
        if info._obj.version != real.nvmlMarginTemperature_v1:
            return int(real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        info._obj.marginTemperature = -3
        return int(real.NVML_SUCCESS)


def test_real_nvml_over_binding_reads_limits_and_a_signed_margin(over_binding: Any) -> None:
    client = over_binding(CLibWithTemperatureLimits())
    assert client.temperature_threshold(pointer(GPU0), nvml.TEMPERATURE_THRESHOLD_SLOWDOWN) == 89
    with pytest.raises(NvmlError) as refused:
        client.temperature_threshold(pointer(GPU0), nvml.TEMPERATURE_THRESHOLD_SHUTDOWN)
    assert refused.value.code == nvml.ERROR_NOT_SUPPORTED
    assert client.margin_temperature(pointer(GPU0)) == -3


def test_real_nvml_over_binding_on_a_driver_without_the_margin(over_binding: Any) -> None:
    """An older driver lacks nvmlDeviceGetMarginTemperature: FUNCTION_NOT_FOUND, which the
    receiver remembers as unsupported (the margin's series left out, never asked again)."""
    client = over_binding(CLib())
    with pytest.raises(NvmlError) as caught:
        client.margin_temperature(pointer(GPU0))
    assert caught.value.code in nvml.UNSUPPORTED_CODES


# --- the receiver over the real backend -------------------------------------------------------


async def test_receiver_scrapes_through_the_real_backend(
    fake: FakePynvml, telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> None:
    del fake.devices[GPU1]  # one GPU with MIG off
    fake.devices[GPU0].mig_mode = real.NVML_DEVICE_MIG_DISABLE
    config = NvmlReceiverConfig.model_validate({"backend": "nvml"})
    receiver = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, telemetry), config, sink, clock=clock
    )
    assert isinstance(receiver.client, RealNvml)
    try:
        batch = await receiver.scrape()
    finally:
        await receiver.shutdown()
    gpu = by_id(batch)["GPU-aaaa"]
    assert gpu.resource["hw.model"] == "NVIDIA H100 80GB HBM3"
    assert gpu.resource["nvidia.gpu.pci_bus_id"] == "00000000:17:00.0"
    assert by_attribute(gpu, "hw.gpu.utilization", "hw.gpu.task")["general"] == 0.42
    assert by_attribute(gpu, "hw.temperature", "hw.sensor_location")["gpu"] == 61
    assert gpu.resource["hw.serial_number"] and gpu.resource["hw.firmware_version"]
    assert value(gpu, "hw.gpu.memory.usage") == 49_400
    assert value(gpu, "nvidia.gpu.memory.reserved") == 600
    assert value(gpu, "nvidia.gpu.sm.clock") == 1980e6
    assert fake.called("nvmlInit") == [()]
    assert len(fake.called("nvmlShutdown")) == 1
    assert fake.called("nvmlEventSetFree") == [(0x7000,)]
    errors = [m for m in telemetry.collect().metrics if m.name == "otelgpu_nvml_read_errors_total"]
    assert errors == []  # every source answered through the real backend without a failure


async def test_receiver_stops_asking_a_driver_without_processes_v3(
    fake: FakePynvml, telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> None:
    del fake.devices[GPU1]
    fake.devices[GPU0].mig_mode = real.NVML_DEVICE_MIG_DISABLE
    fake.fail["nvmlDeviceGetComputeRunningProcesses"] = real.NVML_ERROR_FUNCTION_NOT_FOUND
    config = NvmlReceiverConfig.model_validate(
        {"backend": "nvml", "processes": True, "metrics": PROCESS_METRICS_ON}
    )
    receiver = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, telemetry), config, sink, clock=clock
    )
    try:
        await receiver.scrape()
        await receiver.scrape()
    finally:
        await receiver.shutdown()
    # Remembered as unsupported after the first answer, not an error counted every cycle.
    assert len(fake.called("nvmlDeviceGetComputeRunningProcesses")) == 1
    errors = [m for m in telemetry.collect().metrics if m.name == "otelgpu_nvml_read_errors_total"]
    assert errors == []
