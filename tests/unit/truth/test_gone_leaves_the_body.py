"""What is gone leaves `/metrics` at the next batch, not at `metric_expiration`: the last holder
of a GPU, a GPU process that ended, the series of a GPU that NVML lost (up and status aside).
Each case runs the real producer (k8s_attributes, the nvml receiver's simulated backend) into
the real Prometheus translation, in both namings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.labels import Naming
from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost, Sink
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    FakePodResources,
    allocatable,
    container,
    gpu,
    make_processor,
    pod,
)
from tests.unit.receivers.nvml.test_receiver import wait_for
from tests.unit.truth.body import Body

ALLOCATION = "nvidia_gpu_allocation_ratio"  # the same name in both namings


@asynccontextmanager
async def held_by_train_0() -> AsyncIterator[
    tuple[K8sAttributesProcessor, FakePodResources, FakeClock]
]:
    """A started k8s_attributes whose kubelet says train-0 holds GPU A."""
    telemetry, clock, client = SelfTelemetry(), FakeClock(), FakePodResources()
    client.devices = allocatable({GPU: [UUID_A]})
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    try:
        yield processor, client, clock
    finally:
        await processor.shutdown()


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
async def test_the_last_holder_leaving_takes_its_allocation_series_along(naming: Naming) -> None:
    async with held_by_train_0() as (processor, client, clock):
        body = Body(naming)
        lines = body.ingest(processor.process((gpu(UUID_A, 0),)))
        held = [line for line in lines if 'train-0"' in line]
        assert any(line.startswith(ALLOCATION) for line in held)

        client.set()  # the pod is deleted: nobody holds the GPU
        await clock.advance(10)
        lines = body.ingest(processor.process((gpu(UUID_A, 0),)))
        assert [line for line in lines if "train-0" in line] == []
        assert [line for line in lines if line.startswith(ALLOCATION)] == []
        assert any(UUID_A in line for line in lines)  # the GPU itself still reports


async def test_a_device_never_held_gets_no_empty_marker_batch_after_batch() -> None:
    """Only a device that had allocation series gets the marker that empties them, once."""
    telemetry, clock, client = SelfTelemetry(), FakeClock(), FakePodResources()
    client.devices = allocatable({GPU: [UUID_A]})
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    try:
        out = processor.process((gpu(UUID_A, 0),))
        assert [rm for rm in out if not rm.metrics] == []
        client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
        await clock.advance(10)
        processor.process((gpu(UUID_A, 0),))
        client.set()
        await clock.advance(10)
        first = processor.process((gpu(UUID_A, 0),))
        second = processor.process((gpu(UUID_A, 0),))
        emptied = [rm.identity for rm in first if not rm.metrics]
        assert emptied == [(semconv.GPU_ALLOCATION, UUID_A)]
        assert [rm for rm in second if not rm.metrics] == []
    finally:
        await processor.shutdown()


def _receiver(telemetry: SelfTelemetry, clock: FakeClock, **config: object) -> NvmlReceiver:
    config.setdefault("backend", "simulated")
    parsed = NvmlReceiverConfig.model_validate(config)
    settings = make_settings("nvml", Kind.RECEIVER, telemetry)
    return NvmlReceiver(settings, parsed, Sink(), clock=clock)


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
async def test_an_ended_process_leaves_the_body_at_the_next_cycle(
    naming: Naming, tmp_path: Path
) -> None:
    telemetry, clock = SelfTelemetry(), FakeClock()
    procs = [{"pid": 100, "used_memory": "3GiB"}, {"pid": 200, "used_memory": "1GiB"}]
    receiver = _receiver(
        telemetry,
        clock,
        processes=True,
        metrics={"nvidia.gpu.process.memory.usage": {"enabled": True}},
        host_proc=str(tmp_path),
        simulated={"gpus": [{"uuid": "GPU-a", "processes": procs}]},
    )
    try:
        body = Body(naming)
        lines = body.ingest(await receiver.scrape())
        assert any('="100"' in line for line in lines)
        assert isinstance(receiver.client, SimulatedNvml)
        receiver.client.set_processes(0, [(200, 1 << 30)])
        lines = body.ingest(await receiver.scrape())
        assert [line for line in lines if '="100"' in line] == []
        assert any('="200"' in line for line in lines)
    finally:
        await receiver.shutdown()


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
async def test_a_lost_gpu_keeps_its_up_info_and_xid_series(naming: Naming) -> None:
    telemetry, clock = SelfTelemetry(), FakeClock()
    receiver = _receiver(
        telemetry,
        clock,
        simulated={"gpus": [{"uuid": "GPU-a", "lost_after": "30s"}, {"uuid": "GPU-b"}]},
    )
    xid_name = "nvidia_gpu_xid_errors_total" if naming == "otel" else "DCGM_FI_DEV_XID_ERRORS"
    try:
        body = Body(naming)
        assert isinstance(receiver.client, SimulatedNvml)
        await receiver.scrape()
        receiver.client.inject_xid(0, 79)
        xid = receiver._xid
        assert xid is not None
        await wait_for(lambda: sum(sum(c.values()) for c in xid.snapshot().values()) == 1)
        lines = body.ingest(await receiver.scrape())
        xid_lines = [line for line in lines if line.startswith(xid_name) and "GPU-a" in line]
        assert xid_lines, "the XID was counted before the GPU was lost"
        clock.now += 31
        lines = body.ingest(await receiver.scrape())
        names = {line.partition("{")[0] for line in lines if '"GPU-a"' in line}
        # up says it is lost, and why (its health summary, with the XID before the loss); the
        # info series keeps its static facts (serial, VBIOS) for the operator who has to find
        # the board; the XID series is the evidence, as it was before the loss
        assert names == {"nvidia_gpu_up", "hw_gpu_info", xid_name}, names
        (up,) = [line for line in lines if line.startswith("nvidia_gpu_up{") and "GPU-a" in line]
        assert 'hw_state="failed"' in up and up.endswith(" 0")
        assert 'nvidia_gpu_health_reason="gpu_lost,xid_79"' in up, up
        assert [line for line in lines if line.startswith(xid_name) and "GPU-a" in line] == (
            xid_lines
        )
        assert any('"GPU-b"' in line for line in lines if line.startswith(tuple(names)))
    finally:
        await receiver.shutdown()


async def test_a_gone_marker_passes_k8s_attributes_untouched() -> None:
    """The lost GPU's marker beside its up/status resource: one allocation series per holder
    still (the marker was taken for a second device, and OTLP sent each allocation twice)."""
    async with held_by_train_0() as (processor, _, _):
        device = gpu(UUID_A, 0)
        marker = replace(device, metrics=())
        out = processor.process((marker, device))
        assert out[0] is marker
        allocations = [rm for rm in out if rm.metrics and rm.identity != UUID_A]
        assert len(allocations) == 1
