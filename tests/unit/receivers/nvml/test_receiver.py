"""The nvml receiver, run through the simulated backend (the production receiver code)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import MetricKind
from otelgpu.receivers.nvml import nvml, real_nvml
from otelgpu.receivers.nvml import receiver as receiver_module
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.metrics import CATALOG
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.simulated import SimHandle, SimulatedNvml
from otelgpu.receivers.nvml.sources import FIELD_IDS
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost, Sink
from tests.unit.receivers.nvml.conftest import (
    PROCESS_METRICS_ON,
    MakeReceiver,
    by_attribute,
    by_id,
    has_point,
    metrics,
    sim,
    value,
)

ALL_ON = {spec.name: {"enabled": True} for spec in CATALOG}
CID = "4f1c0a9e" * 8


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Waits for work done by the receiver's own threads (bounded, never a timing assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_every_catalog_metric_is_emitted(make_receiver: MakeReceiver, tmp_path: Path) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{CID}.scope\n")
    receiver = make_receiver(
        metrics=ALL_ON,
        processes=True,
        host_proc=str(tmp_path),
        simulated={
            "gpus": [
                {"processes": [{"pid": 4242, "used_memory": "2GiB"}]},
                {"model": "NVIDIA A100-SXM4-80GB"},  # answers its temperature limits (Hopper: none)
            ]
        },
    )
    sim(receiver).set_reading(0, "vgpu_licensed", 1)  # as in a vGPU guest (bare metal: none)
    await receiver.scrape()  # opens NVML; GPM takes its first sample
    sim(receiver).inject_xid(0, 48)
    await wait_for(lambda: receiver._xid is not None and bool(receiver._xid.snapshot()))
    batch = await receiver.scrape()

    emitted = {m.name: m for rm in batch for m in rm.metrics}
    assert set(emitted) == {spec.name for spec in CATALOG}
    for spec in CATALOG:
        metric = emitted[spec.name]
        assert (metric.unit, metric.kind, metric.monotonic) == (
            spec.unit,
            spec.kind,
            spec.monotonic,
        )
        for point in metric.points:
            # hw.id and hw.type ride on every point (the hardware conventions require them).
            expected = {*spec.attributes, "hw.id", "hw.type"}
            assert set(point.attributes) == expected, spec.name
            if spec.unit == "1":
                assert 0 <= point.value <= 1, spec.name
            if spec.monotonic:
                assert point.start_time_unix_nano > 0


async def test_values_are_converted_to_catalog_units(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(metrics=ALL_ON)
    await receiver.scrape()
    gpu = next(iter(by_id(await receiver.scrape()).values()))
    client = sim(receiver)
    handle = client.device_handle(0)
    util, mem_util = client.utilization(handle)
    used, free, reserved, total = client.memory_info(handle)
    fields = {f.field_id: f.value for f in client.field_values(handle, list(FIELD_IDS.values()))}

    tasks = by_attribute(gpu, "hw.gpu.utilization", "hw.gpu.task")
    assert tasks == {
        "general": util / 100,
        "encoder": client.encoder_utilization(handle) / 100,
        "decoder": client.decoder_utilization(handle) / 100,
    }
    assert value(gpu, "nvidia.gpu.memory.busy") == mem_util / 100
    assert value(gpu, "hw.gpu.memory.utilization") == used / total
    assert value(gpu, "hw.gpu.memory.usage") == used
    assert value(gpu, "hw.gpu.memory.limit") == total == used + free + reserved
    assert value(gpu, "nvidia.gpu.memory.clock") == 2619 * 10**6
    assert type(value(gpu, "nvidia.gpu.memory.clock")) is int  # ints stay ints
    assert value(gpu, "hw.power") == pytest.approx(fields[186] / 1000)
    assert value(gpu, "hw.energy") == pytest.approx(fields[83] / 1000)
    assert value(gpu, "nvidia.gpu.nvlink.io") == (fields[138] + fields[139]) * 1024
    nvlink = by_attribute(gpu, "nvidia.gpu.nvlink.io.by_direction", "network.io.direction")
    assert nvlink == {"transmit": fields[138] * 1024, "receive": fields[139] * 1024}
    temperatures = by_attribute(gpu, "hw.temperature", "hw.sensor_location")
    assert temperatures == {"gpu": client.temperature(handle), "memory": fields[82]}
    assert by_attribute(gpu, "hw.errors", "error.type") == {
        "corrected": fields[3],
        "uncorrected": fields[4],
    }


async def test_resources_for_gpus_and_mig_instances(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(
        metrics={"hw.gpu.memory.limit": {"enabled": True}},
        simulated={
            "gpus": [
                {"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1", "profile": "3g.40gb"}]},
                {"uuid": "GPU-b", "model": "NVIDIA A100-SXM4-40GB"},
            ]
        },
    )
    resources = by_id(await receiver.scrape())

    assert list(resources) == ["GPU-a", "MIG-a1", "GPU-b"]
    gpu_a, mig, gpu_b = (dict(rm.resource) for rm in resources.values())
    assert gpu_a["hw.type"] == "gpu" and gpu_a["hw.vendor"] == "NVIDIA"
    assert gpu_a["hw.name"] == "nvidia0" and gpu_a["nvidia.gpu.index"] == "0"
    assert gpu_a["hw.driver_version"] == "550.54.15"
    assert gpu_a["hw.serial_number"] and gpu_a["hw.firmware_version"]
    assert gpu_a["host.name"] and gpu_a["nvidia.gpu.pci_bus_id"]
    assert gpu_b["hw.model"] == "NVIDIA A100-SXM4-40GB" and gpu_b["nvidia.gpu.index"] == "1"
    assert mig["hw.parent"] == "GPU-a" and mig["nvidia.mig.profile"] == "3g.40gb"
    assert mig["hw.name"] == "nvidia0/gi1"
    assert (mig["nvidia.mig.gpu_instance_id"], mig["nvidia.mig.compute_instance_id"]) == ("1", "0")
    assert value(resources["MIG-a1"], "hw.gpu.memory.limit") == 40 << 30
    assert "hw.gpu.utilization" not in metrics(resources["MIG-a1"])  # NVML: not on MIG


async def test_resource_attributes_are_built_once(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver()
    first = await receiver.scrape()
    second = await receiver.scrape()
    assert first[0].resource is second[0].resource


async def test_devices_select_by_index_or_uuid(make_receiver: MakeReceiver) -> None:
    gpus = [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}, {"uuid": "GPU-c"}]
    receiver = make_receiver(devices=[0, "GPU-c"], simulated={"gpus": gpus})
    assert list(by_id(await receiver.scrape())) == ["GPU-a", "GPU-c"]


async def test_disabled_metric_is_not_read(make_receiver: MakeReceiver) -> None:
    off = {"enabled": False}
    receiver = make_receiver(
        metrics={"nvidia.gpu.pcie.tx.throughput": off, "nvidia.gpu.pcie.rx.throughput": off}
    )
    batch = await receiver.scrape()
    assert "nvidia.gpu.pcie.tx.throughput" not in metrics(batch[0])
    assert sim(receiver).calls["nvmlDeviceGetPcieThroughput"] == 0
    assert "nvidia.gpu.power.limit" not in metrics(batch[0])  # off by default


async def test_all_fields_go_in_one_batched_call_per_gpu(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(metrics=ALL_ON, simulated={"gpus": 2})
    for _ in range(3):
        await receiver.scrape()
    assert sim(receiver).calls["nvmlDeviceGetFieldValues"] == 2 * 3
    assert sim(receiver).field_requests[(1, 186)] == 3


async def test_lost_gpu_is_reported_down_while_others_report(
    make_receiver: MakeReceiver, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = make_receiver(
        simulated={
            "gpus": [
                {"uuid": "GPU-a", "lost_after": "30s", "mig": [{"uuid": "MIG-a1"}]},
                {"uuid": "GPU-b"},
            ]
        }
    )
    before = by_id(await receiver.scrape())
    assert value(before["GPU-a"], "nvidia.gpu.up") == 1
    calls_before = sim(receiver).calls["nvmlDeviceGetUtilizationRates"]

    clock.now += 31
    for _ in range(3):
        after = by_id(await receiver.scrape())

    assert metrics(after["GPU-a"]).keys() == {"nvidia.gpu.up"}
    assert value(after["GPU-a"], "nvidia.gpu.up") == 0
    assert by_attribute(after["GPU-a"], "nvidia.gpu.up", "hw.state") == {"failed": 0}
    assert by_attribute(after["GPU-a"], "nvidia.gpu.up", "nvidia.gpu.health.reason") == {
        "gpu_lost": 0
    }
    assert by_attribute(after["GPU-b"], "nvidia.gpu.up", "hw.state") == {"ok": 1}
    assert by_attribute(after["MIG-a1"], "nvidia.gpu.up", "hw.state") == {"failed": 0}
    assert value(after["MIG-a1"], "nvidia.gpu.up") == 0
    assert value(after["GPU-b"], "nvidia.gpu.up") == 1
    assert "hw.gpu.utilization" in metrics(after["GPU-b"])
    # The lost GPU is asked once more (the call that found it lost), then left alone.
    assert sim(receiver).field_requests[(0, FIELD_IDS["NVML_FI_DEV_POWER_INSTANT"])] == 2
    assert sim(receiver).field_requests[(1, FIELD_IDS["NVML_FI_DEV_POWER_INSTANT"])] == 4
    assert sim(receiver).calls["nvmlDeviceGetUtilizationRates"] == calls_before + 3
    assert sum("is lost" in r.message for r in caplog.records) == 1


async def test_a_lost_gpu_keeps_its_xid_evidence(
    make_receiver: MakeReceiver, clock: FakeClock
) -> None:
    """XID 79 (fallen off the bus) and then the loss: the XID series and the xid reason are
    the evidence of what happened, and stay next to the GPU's `nvidia.gpu.up` 0."""
    receiver = make_receiver(
        simulated={"gpus": [{"uuid": "GPU-a", "lost_after": "30s"}, {"uuid": "GPU-b"}]}
    )
    await receiver.scrape()
    sim(receiver).inject_xid(0, 79)
    await wait_for(lambda: receiver._xid is not None and bool(receiver._xid.snapshot()))
    before = by_id(await receiver.scrape())
    assert by_attribute(before["GPU-a"], "nvidia.gpu.xid.errors", "nvidia.xid.code") == {79: 1}
    reason = "nvidia.gpu.health.reason"
    assert by_attribute(before["GPU-a"], "nvidia.gpu.up", reason) == {"xid_79": 1}

    clock.now += 31
    for _ in range(3):
        after = by_id(await receiver.scrape())

    assert metrics(after["GPU-a"]).keys() == {"nvidia.gpu.up", "nvidia.gpu.xid.errors"}
    assert by_attribute(after["GPU-a"], "nvidia.gpu.xid.errors", "nvidia.xid.code") == {79: 1}
    assert by_attribute(after["GPU-a"], "nvidia.gpu.up", reason) == {"gpu_lost,xid_79": 0}
    assert by_attribute(after["GPU-a"], "nvidia.gpu.up", "hw.state") == {"failed": 0}
    assert not metrics(after["GPU-b"])["nvidia.gpu.xid.errors"].points  # no XID: no point


async def test_a_gpu_lost_before_discovery_leaves_the_others(
    make_receiver: MakeReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = make_receiver(
        simulated={"gpus": [{"uuid": "GPU-a", "lost_after": "0s"}, {"uuid": "GPU-b"}]}
    )
    assert list(by_id(await receiver.scrape())) == ["GPU-b"]
    assert any("GPU 0 could not be opened" in r.message for r in caplog.records)


async def test_no_event_support_leaves_the_other_metrics(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(simulated={"gpus": [{"xid_errors": [{"code": 79}]}]})

    def no_events() -> object:
        raise nvml.NvmlError(nvml.ERROR_NOT_SUPPORTED)

    sim(receiver).event_set_create = no_events  # type: ignore[method-assign]
    batch = await receiver.scrape()
    assert receiver._xid is None
    assert "hw.gpu.utilization" in metrics(batch[0])


async def test_unsupported_field_and_call_are_not_retried(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(
        simulated={
            "gpus": [
                {
                    "unsupported_fields": [
                        "NVML_FI_DEV_MEMORY_TEMP",
                        "nvmlDeviceGetEncoderUtilization",
                        "NVML_GPM_METRIC_DRAM_BW_UTIL",
                    ]
                }
            ]
        }
    )
    for _ in range(5):
        batch = await receiver.scrape()

    client = sim(receiver)
    assert client.field_requests[(0, FIELD_IDS["NVML_FI_DEV_MEMORY_TEMP"])] == 1
    assert client.field_requests[(0, FIELD_IDS["NVML_FI_DEV_POWER_INSTANT"])] == 5
    assert client.calls["nvmlDeviceGetEncoderUtilization"] == 1
    assert client.calls["nvmlDeviceGetDecoderUtilization"] == 5
    emitted = metrics(batch[0])
    assert not has_point(batch[0], "hw.temperature", "hw.sensor_location", "memory")
    assert has_point(batch[0], "hw.temperature", "hw.sensor_location", "gpu")
    assert not has_point(batch[0], "hw.gpu.utilization", "hw.gpu.task", "encoder")
    assert has_point(batch[0], "hw.gpu.utilization", "hw.gpu.task", "decoder")
    assert "nvidia.gpu.dram.active" not in emitted and "nvidia.gpu.tensor.active" in emitted


async def test_unexpected_error_is_counted_and_retried(
    make_receiver: MakeReceiver, telemetry: SelfTelemetry
) -> None:
    receiver = make_receiver()
    client = sim(receiver)
    failing = {"left": 1}
    real = client.temperature

    def temperature(handle: SimHandle) -> int:
        if failing["left"]:
            failing["left"] -= 1
            raise nvml.NvmlError(nvml.ERROR_UNKNOWN)
        return real(handle)

    client.temperature = temperature  # type: ignore[method-assign]
    first = await receiver.scrape()
    second = await receiver.scrape()

    core = ("hw.temperature", "hw.sensor_location", "gpu")
    assert not has_point(first[0], *core) and "hw.power" in metrics(first[0])
    assert has_point(second[0], *core)  # not remembered as unsupported
    counted = _counter(telemetry, "otelgpu_nvml_read_errors_total")
    assert counted == {"nvmlDeviceGetTemperature": 1}


async def test_a_surprising_answer_costs_one_reading(
    make_receiver: MakeReceiver, telemetry: SelfTelemetry
) -> None:
    receiver = make_receiver(simulated={"gpus": 2})
    client = sim(receiver)

    def broken(handle: SimHandle) -> tuple[int, int, int, int]:
        raise TypeError("not a tuple")

    client.memory_info = broken  # type: ignore[method-assign]
    batch = await receiver.scrape()
    assert len(batch) == 2
    assert all("hw.gpu.memory.usage" not in metrics(rm) for rm in batch)
    assert all("hw.gpu.utilization" in metrics(rm) for rm in batch)
    assert _counter(telemetry, "otelgpu_nvml_read_errors_total") == {"nvmlDeviceGetMemoryInfo": 2}


def _counter(telemetry: SelfTelemetry, name: str) -> dict[str, float]:
    for metric in telemetry.collect().metrics:
        if metric.name == name:
            return {str(p.attributes["source"]): p.value for p in metric.points}
    return {}


async def test_library_missing_reports_down_and_retries_with_backoff(
    make_receiver: MakeReceiver,
    clock: FakeClock,
    telemetry: SelfTelemetry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver = make_receiver(collection_interval="10s", simulated={"library_missing": True})
    client = sim(receiver)
    attempts = []
    for t in range(0, 200, 10):  # one scrape every 10 s
        before = client.calls["nvmlInit"]
        assert await receiver.scrape() == ()
        if client.calls["nvmlInit"] > before:
            attempts.append(t)
        clock.now += 10
    assert attempts == [0, 10, 30, 70, 150]  # the delay doubles: 10, 20, 40, 80 s
    assert telemetry.sources["nvml"].up is False
    assert sum("source nvml is down" in r.message for r in caplog.records) == 1  # logged once
    assert "Library Not Found" in telemetry.sources["nvml"].last_error


async def test_library_appearing_later_is_picked_up(
    make_receiver: MakeReceiver, clock: FakeClock, telemetry: SelfTelemetry
) -> None:
    receiver = make_receiver(collection_interval="10s", simulated={"library_missing": 1})
    assert await receiver.scrape() == ()
    assert telemetry.sources["nvml"].up is False
    clock.now += 10
    batch = await receiver.scrape()
    assert batch and telemetry.sources["nvml"].up is True
    assert sim(receiver).calls["nvmlInit"] == 2


async def test_real_backend_without_driver_is_down_not_dead(
    telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> None:
    class NoLibrary(real_nvml.RealNvml):
        def init(self) -> None:
            raise nvml.NvmlError(nvml.ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found")

    config = NvmlReceiverConfig(backend="nvml")  # type: ignore[arg-type]
    settings = make_settings("nvml", Kind.RECEIVER, telemetry)
    receiver = NvmlReceiver(settings, config, sink, client=NoLibrary(), clock=clock)
    assert await receiver.scrape() == ()
    assert telemetry.sources["nvml"].up is False
    assert "Library Not Found" in telemetry.sources["nvml"].last_error
    await receiver.shutdown()


async def test_xid_errors_are_counted_per_code(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(
        simulated={"gpus": [{"uuid": "GPU-a", "xid_errors": [{"code": 79}]}, {"uuid": "GPU-b"}]}
    )
    await receiver.scrape()
    client = sim(receiver)
    client.inject_xid(0, 79)
    client.inject_xid(1, 13)
    xid = receiver._xid
    assert xid is not None
    await wait_for(lambda: sum(sum(c.values()) for c in xid.snapshot().values()) == 3)
    resources = by_id(await receiver.scrape())

    def counts(uuid: str) -> dict[object, float]:
        points = metrics(resources[uuid])["nvidia.gpu.xid.errors"].points
        return {p.attributes["nvidia.xid.code"]: p.value for p in points}

    assert counts("GPU-a") == {79: 2}
    assert counts("GPU-b") == {13: 1}


async def test_gpm_is_sampled_when_nvml_opens_and_needs_a_supporting_gpu(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(
        simulated={
            "gpus": [
                {"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}]},
                {"uuid": "GPU-b", "gpm": False, "mig": [{"uuid": "MIG-b1"}]},
            ]
        }
    )
    first = by_id(await receiver.scrape())
    assert 0 < value(first["GPU-a"], "nvidia.gpu.graphics.active") <= 1  # its first sample at open
    second = by_id(await receiver.scrape())
    assert 0 < value(second["GPU-a"], "nvidia.gpu.graphics.active") <= 1
    # MIG instances are sampled through their GPU, as series of their own.
    assert 0 < value(second["MIG-a1"], "nvidia.gpu.graphics.active") <= 1
    assert value(second["MIG-a1"], "nvidia.gpu.graphics.active") != value(
        second["GPU-a"], "nvidia.gpu.graphics.active"
    )
    assert sim(receiver).calls["nvmlGpmMigSampleGet"] == 3  # at open, then one a cycle
    assert "nvidia.gpu.tensor.active" not in metrics(second["GPU-b"])
    assert "nvidia.gpu.tensor.active" not in metrics(second["MIG-b1"])
    await receiver.shutdown()
    assert sim(receiver).calls["nvmlGpmSampleFree"] == sim(receiver).calls["nvmlGpmSampleAlloc"]


async def test_processes_are_mapped_to_containers(
    make_receiver: MakeReceiver, tmp_path: Path
) -> None:
    (tmp_path / "100").mkdir()
    (tmp_path / "100" / "cgroup").write_text(f"0::/system.slice/docker-{CID}.scope\n")
    (tmp_path / "200").mkdir()
    (tmp_path / "200" / "cgroup").write_text("0::/user.slice/user-0.slice/session-1.scope\n")
    procs = [{"pid": 100, "used_memory": "3GiB"}, {"pid": 200, "used_memory": "1GiB"}]
    receiver = make_receiver(
        processes=True,
        metrics=PROCESS_METRICS_ON,
        host_proc=str(tmp_path),
        simulated={"gpus": [{"processes": procs}]},
    )
    batch = await receiver.scrape()
    processes = {rm.resource["process.pid"]: rm for rm in batch if "process.pid" in rm.resource}

    assert processes[100].resource["container.id"] == CID
    assert processes[200].resource["container.id"] == ""
    assert value(processes[100], "nvidia.gpu.process.memory.usage") == 3 << 30
    assert processes[100].resource["hw.id"] == batch[0].resource["hw.id"]

    sim(receiver).set_processes(0, [(200, 1 << 30)])
    batch = await receiver.scrape()
    running = [rm for rm in batch if "process.pid" in rm.resource and rm.metrics]
    assert [rm.resource["process.pid"] for rm in running] == [200]
    ended = [rm for rm in batch if not rm.metrics]  # said once, so exporters drop its series
    assert [rm.identity for rm in ended] == [(batch[0].resource["hw.id"], 100)]


async def test_mig_processes_are_read_per_instance(
    make_receiver: MakeReceiver, tmp_path: Path
) -> None:
    receiver = make_receiver(
        processes=True,
        metrics=PROCESS_METRICS_ON,
        host_proc=str(tmp_path),
        simulated={
            "gpus": [{"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}], "processes": [{"pid": 7}]}]
        },
    )
    batch = await receiver.scrape()
    owners = [rm.resource["hw.id"] for rm in batch if "process.pid" in rm.resource]
    assert owners == ["MIG-a1"]  # not also counted on the GPU, which answers for all
    assert batch[-1].resource["hw.parent"] == "GPU-a"


async def test_power_falls_back_to_the_dedicated_call(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(
        simulated={"gpus": [{"unsupported_fields": ["NVML_FI_DEV_POWER_INSTANT"]}, {}]}
    )
    for _ in range(3):
        batch = by_id(await receiver.scrape())
    client = sim(receiver)
    assert all(0 < value(rm, "hw.power") < 1000 for rm in batch.values())
    assert client.calls["nvmlDeviceGetPowerUsage"] == 3  # GPU 0 only, from the first cycle on
    assert client.field_requests[(0, FIELD_IDS["NVML_FI_DEV_POWER_INSTANT"])] == 1


async def test_processes_off_by_default(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(simulated={"gpus": [{"processes": [{"pid": 1}]}]})
    batch = await receiver.scrape()
    assert len(batch) == 1
    assert sim(receiver).calls["nvmlDeviceGetComputeRunningProcesses"] == 0


async def test_nvml_calls_run_off_the_event_loop(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver()
    client = sim(receiver)
    threads: set[str] = set()
    real = client.utilization

    def utilization(handle: SimHandle) -> tuple[int, int]:
        threads.add(threading.current_thread().name)
        return real(handle)

    client.utilization = utilization  # type: ignore[method-assign]
    await receiver.scrape()
    assert threads and threading.main_thread().name not in threads


async def test_lifecycle_collects_on_interval_and_shuts_down_cleanly(
    telemetry: SelfTelemetry, sink: Sink
) -> None:
    config = NvmlReceiverConfig.model_validate(
        {"collection_interval": "20ms", "simulated": {"gpus": 2}}
    )
    settings = make_settings("nvml", Kind.RECEIVER, telemetry)
    receiver = NvmlReceiver(settings, config, sink)
    await receiver.start(FakeHost(telemetry))
    await wait_for(lambda: len(sink.batches) >= 2)
    await receiver.shutdown()
    await receiver.shutdown()  # idempotent

    assert not [t for t in threading.enumerate() if t.name.startswith(("nvml", "nvml-xid"))]
    assert isinstance(receiver.client, SimulatedNvml)
    assert receiver.client.calls["nvmlShutdown"] == 1
    assert telemetry.sources["nvml"].up is True
    assert len(sink.batches[0]) == 2


async def test_a_hung_nvml_call_does_not_hang_shutdown(
    make_receiver: MakeReceiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = make_receiver()
    await receiver.scrape()
    entered, release = threading.Event(), threading.Event()

    def hung(handle: SimHandle) -> int:
        entered.set()
        release.wait(10)
        return 50

    sim(receiver).temperature = hung  # type: ignore[method-assign]
    scrape = asyncio.create_task(receiver.scrape())
    await wait_for(entered.is_set)
    scrape.cancel()  # as the scrape controller's timeout does
    monkeypatch.setattr(receiver_module, "CLOSE_TIMEOUT", 0.05)
    try:
        await receiver.shutdown()
        assert any("did not answer" in r.message for r in caplog.records)
    finally:
        release.set()


async def test_shutdown_without_start_is_safe(make_receiver: MakeReceiver) -> None:
    await make_receiver().shutdown()


def test_metric_kinds_are_gauge_or_sum() -> None:
    for spec in CATALOG:
        assert spec.kind in (MetricKind.GAUGE, MetricKind.SUM), spec.name
        assert not spec.monotonic or spec.kind is MetricKind.SUM, spec.name


async def test_a_watched_gpu_reports_its_xid_metric_without_points_before_any_xid(
    make_receiver: MakeReceiver,
) -> None:
    """Every GPU whose XIDs are watched says so (dcgm naming serves it `0`, "No Error")."""
    receiver = make_receiver(simulated={"gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}]})
    resources = by_id(await receiver.scrape())
    for uuid in ("GPU-a", "GPU-b"):
        assert metrics(resources[uuid])["nvidia.gpu.xid.errors"].points == ()


async def test_no_xid_metric_from_a_gpu_whose_xids_are_not_watched(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(simulated={"gpus": [{"uuid": "GPU-a"}]})
    client = sim(receiver)

    def refused(handle: SimHandle, event_set: object) -> None:
        raise nvml.NvmlError(nvml.ERROR_NOT_SUPPORTED)

    client.register_xid_events = refused  # type: ignore[method-assign]
    resources = by_id(await receiver.scrape())
    assert "nvidia.gpu.xid.errors" not in metrics(resources["GPU-a"])


async def test_xid_points_list_the_latest_xid_last(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(simulated={"gpus": [{"uuid": "GPU-a"}]})
    await receiver.scrape()
    client, xid = sim(receiver), receiver._xid
    assert xid is not None
    for code, total in ((79, 1), (13, 2), (79, 3)):  # 79 again: the latest again
        client.inject_xid(0, code)
        await wait_for(lambda t=total: sum(xid.snapshot().get("GPU-a", {}).values()) == t)
    points = metrics(by_id(await receiver.scrape())["GPU-a"])["nvidia.gpu.xid.errors"].points
    assert [(p.attributes["nvidia.xid.code"], p.value) for p in points] == [(13, 1), (79, 2)]
