"""The warnings about NVIDIA DRA claim devices that label nothing say what is wrong and name
each device."""

from __future__ import annotations

import logging

import pytest

from otelgpu.pdata import semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
)
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.fakes import FakeClock
from tests.unit.processors.k8s_attributes.fakes import UUID_A, FakePodResources, gpu


def _claim_pod(name: str, device: str) -> PodAllocation:
    claimed = ClaimDevice("gpu.nvidia.com", "node-a", device)
    return PodAllocation("ml", name, (ContainerAllocation("c", (), (claimed,)),))


def _with_minor(rm: ResourceMetrics, minor: int) -> ResourceMetrics:
    return ResourceMetrics(
        resource={**rm.resource, semconv.GPU_MINOR: str(minor)},
        metrics=rm.metrics,
        identity=rm.identity,
    )


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


async def test_an_answer_with_claim_devices_naming_no_gpu_says_so_with_their_reasons(
    started: K8sAttributesProcessor,
    client: FakePodResources,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client.set(_claim_pod("vm", "gpu-vfio-0"))
    with caplog.at_level(logging.WARNING):
        await clock.advance(10)
    assert _warnings(caplog) == [
        "DRA claim devices of gpu.nvidia.com that name no GPU on this node: vfio=1"
    ]


async def test_claim_devices_missing_from_the_batch_are_each_named_in_one_warning(
    started: K8sAttributesProcessor,
    client: FakePodResources,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client.set(_claim_pod("a", "gpu-7"), _claim_pod("b", "gpu-8"))
    await clock.advance(10)
    with caplog.at_level(logging.WARNING):
        started.process((_with_minor(gpu(UUID_A, 0), 0),))
    assert _warnings(caplog) == [
        "DRA claim devices with no GPU or MIG instance in the batch (do the nvml resources "
        "carry nvidia.gpu.minor / nvidia.mig.placement_start?): minor/7, minor/8"
    ]
