"""What the processor logs when a whole-GPU DRA claim names a MIG-enabled GPU: which GPU, said
once while nothing changes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
)
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.k8s_attributes.fakes import (
    MIG_1,
    UUID_A,
    FakePodResources,
    gpu,
    make_processor,
    mig,
    series,
)

UNMAPPED = "otelgpu_dra_devices_unmapped_total"


@pytest.fixture
async def started(
    telemetry: SelfTelemetry, clock: FakeClock
) -> AsyncIterator[K8sAttributesProcessor]:
    client = FakePodResources()
    # a whole-GPU claim on the GPU with minor 1
    claimed = ClaimDevice(driver="gpu.nvidia.com", pool="node-a", device="gpu-1")
    client.set(PodAllocation("ml", "whole", (ContainerAllocation("c", (), (claimed,)),)))
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)
    yield processor
    await processor.shutdown()


def _minor(rm: ResourceMetrics, **extra: str) -> ResourceMetrics:
    return replace(rm, resource={**rm.resource, semconv.GPU_MINOR: "1", **extra})


async def test_a_whole_gpu_claim_on_a_mig_enabled_gpu_is_logged_naming_the_gpu_once(
    started: K8sAttributesProcessor,
    telemetry: SelfTelemetry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    batch = (
        _minor(gpu(UUID_A, 0)),
        _minor(mig(MIG_1, UUID_A, 1), **{semconv.MIG_PLACEMENT_START: "0"}),
    )
    with caplog.at_level(logging.WARNING):
        started.process(batch)
        started.process(batch)
    said = [r.getMessage() for r in caplog.records if "MIG enabled" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(f"a whole-GPU DRA claim names GPU {UUID_A}, which has MIG enabled")
    assert series(telemetry, UNMAPPED, reason="mig_enabled") == 2  # counted on every batch
