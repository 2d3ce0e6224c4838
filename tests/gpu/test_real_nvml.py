"""The nvml receiver on a real GPU (run on the device machine). Skipped where NVML cannot
start, unless OTELGPU_EXPECT_GPU=1 says a GPU is there: then that is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.metrics import BY_NAME
from otelgpu.receivers.nvml.real_nvml import RealNvml
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.sources import FIELD_IDS
from tests.conftest import make_settings
from tests.fakes import Sink

pytestmark = pytest.mark.gpu

# What every NVIDIA datacenter GPU answers (the rest depends on the board and driver).
CORE = {
    "nvidia.gpu.up",
    "hw.gpu.utilization",
    "hw.gpu.memory.usage",
    "hw.gpu.memory.limit",
    "hw.temperature",
    "nvidia.gpu.sm.clock",
}


# Set on a machine with a GPU (the device tool's runs): the real-NVML tests must then run.
EXPECT_GPU = "OTELGPU_EXPECT_GPU"


@pytest.fixture(scope="module")
def real_nvml() -> Iterator[RealNvml]:
    client = RealNvml()
    try:
        client.init()
    except nvml.NvmlError as exc:
        if os.environ.get(EXPECT_GPU) == "1":  # on a GPU machine, no NVML is a failure
            pytest.fail(f"{EXPECT_GPU}=1 but NVML does not start: {exc}")
        pytest.skip(f"no usable NVML here: {exc}")
    try:
        yield client
    finally:
        client.shutdown()


def _receiver(telemetry: SelfTelemetry, **config: object) -> NvmlReceiver:
    parsed = NvmlReceiverConfig.model_validate({"backend": "nvml", **config})
    return NvmlReceiver(make_settings("nvml", Kind.RECEIVER, telemetry), parsed, Sink())


async def test_every_gpu_reports_the_core_metrics(
    real_nvml: RealNvml, telemetry: SelfTelemetry
) -> None:
    receiver = _receiver(telemetry, metrics={n: {"enabled": True} for n in BY_NAME})
    try:
        await receiver.scrape()
        batch = await receiver.scrape()
    finally:
        await receiver.shutdown()
    gpus = [
        rm for rm in batch if "hw.parent" not in rm.resource and "process.pid" not in rm.resource
    ]
    assert len(gpus) == real_nvml.device_count()
    for rm in gpus:
        names = {m.name for m in rm.metrics}
        assert names >= CORE, CORE - names
        assert str(rm.resource["hw.id"]).startswith("GPU-")
        assert rm.resource["hw.driver_version"]
        assert rm.resource["hw.firmware_version"]  # VBIOS: every board has one
        for metric in rm.metrics:
            if metric.unit == "1":
                values = [p.value for p in metric.points]
                assert all(0 <= v <= 1 for v in values), (metric.name, values)
    assert telemetry.sources["nvml"].up is True


def test_batched_field_values_answer_per_field(real_nvml: RealNvml) -> None:
    handle = real_nvml.device_handle(0)
    answer = real_nvml.field_values(handle, list(FIELD_IDS.values()))
    assert [a.field_id for a in answer] == list(FIELD_IDS.values())
    assert all(a.code in (nvml.SUCCESS, *nvml.UNSUPPORTED_CODES) for a in answer)


def test_temperature_limits_answer_or_are_refused_and_agree(real_nvml: RealNvml) -> None:
    """Each threshold and the T.Limit margin are answered or refused for good (never another
    error), and what is answered is plausible: limits above the GPU's temperature, in the order
    max operating <= slowdown <= shutdown, and a margin a running GPU can have (-20..90 °C)."""
    handle = real_nvml.device_handle(0)
    temperature = real_nvml.temperature(handle)
    limits: dict[int, int] = {}
    for threshold in (
        nvml.TEMPERATURE_THRESHOLD_GPU_MAX,
        nvml.TEMPERATURE_THRESHOLD_SLOWDOWN,
        nvml.TEMPERATURE_THRESHOLD_SHUTDOWN,
    ):
        try:
            limits[threshold] = real_nvml.temperature_threshold(handle, threshold)
        except nvml.NvmlError as exc:
            assert exc.code in nvml.UNSUPPORTED_CODES, (threshold, exc)
    assert all(temperature < limit <= 120 for limit in limits.values()), (temperature, limits)
    assert list(limits.values()) == sorted(limits.values()), limits
    try:
        margin = real_nvml.margin_temperature(handle)
    except nvml.NvmlError as exc:
        assert exc.code in nvml.UNSUPPORTED_CODES, exc
    else:
        assert -20 <= margin <= 90, (margin, temperature)


def test_mig_and_event_calls_answer(real_nvml: RealNvml) -> None:
    handle = real_nvml.device_handle(0)
    for mig in real_nvml.mig_instances(handle):
        assert mig.uuid.startswith("MIG-") and mig.profile
    event_set = real_nvml.event_set_create()
    try:
        real_nvml.register_xid_events(handle, event_set)
        with pytest.raises(nvml.NvmlError) as err:
            real_nvml.event_wait(event_set, 10)
        assert err.value.code == nvml.ERROR_TIMEOUT  # a healthy GPU has no XID to report
    finally:
        real_nvml.event_set_free(event_set)


async def test_processes_on_the_gpu_are_listed(
    real_nvml: RealNvml, telemetry: SelfTelemetry
) -> None:
    memory = "nvidia.gpu.process.memory.usage"
    receiver = _receiver(telemetry, processes=True, metrics={memory: {"enabled": True}})
    try:
        batch = await receiver.scrape()
    finally:
        await receiver.shutdown()
    assert batch
    for rm in batch:
        if "process.pid" in rm.resource:
            assert isinstance(rm.resource["container.id"], str)
            assert [m.name for m in rm.metrics] == [memory]
    assert not [t for t in threading.enumerate() if t.name == "nvml-xid"]


def _smi(fields: str) -> dict[str, list[str]]:
    """nvidia-smi's reading of `fields` per GPU, keyed by UUID (the first field)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        if os.environ.get(EXPECT_GPU) == "1":
            pytest.fail(f"{EXPECT_GPU}=1 but nvidia-smi is not on PATH")
        pytest.skip("no nvidia-smi here")
    cmd = [smi, f"--query-gpu=uuid,{fields}", "--format=csv,noheader,nounits"]
    rows = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    return {row[0]: row[1:] for row in (r.split(", ") for r in rows if r)}


def _value(rm: ResourceMetrics, name: str, **attributes: str) -> float:
    (metric,) = [m for m in rm.metrics if m.name == name]
    matching = [p.value for p in metric.points if attributes.items() <= p.attributes.items()]
    assert len(matching) == 1, (name, attributes, metric.points)
    return float(matching[0])


async def test_readings_agree_with_nvidia_smi(
    real_nvml: RealNvml, telemetry: SelfTelemetry
) -> None:
    """The same GPU read by the agent and by nvidia-smi a moment apart: identity exact, sizes
    to the MiB, temperature within a few degrees (a unit or scale slip shows as far more)."""
    receiver = _receiver(telemetry, metrics={"hw.gpu.memory.limit": {"enabled": True}})
    try:
        batch = await receiver.scrape()
    finally:
        await receiver.shutdown()
    smi = _smi("driver_version,memory.total,memory.used,temperature.gpu")
    gpus = {
        str(rm.resource["hw.id"]): rm
        for rm in batch
        if "hw.parent" not in rm.resource and "process.pid" not in rm.resource
    }
    assert set(gpus) == set(smi)
    mib = 1 << 20
    for uuid, (driver, total, used, temp) in smi.items():
        rm = gpus[uuid]
        assert rm.resource["hw.driver_version"] == driver
        assert _value(rm, "hw.gpu.memory.limit") // mib == int(total)
        # used moves between the two reads only if something allocates meanwhile
        assert abs(_value(rm, "hw.gpu.memory.usage") / mib - int(used)) <= 64
        gpu_temp = _value(rm, "hw.temperature", **{"hw.sensor_location": "gpu"})
        assert abs(gpu_temp - int(temp)) <= 3
