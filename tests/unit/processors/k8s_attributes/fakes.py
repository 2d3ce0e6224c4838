"""Test doubles for the processor: a scripted PodResourcesClient and GPU resources."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.pod_resources import (
    ContainerAllocation,
    DeviceAllocation,
    PodAllocation,
    PodResourcesError,
)
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.conftest import make_settings
from tests.fakes import FakeClock

GPU = "nvidia.com/gpu"
UUID_A = "GPU-8f6c3a2e-1111-4b17-9c2e-5da9abb51763"
UUID_B = "GPU-2b4d6f80-2222-4c28-8d3f-6eb0bcc62874"
MIG_1 = "MIG-1c2d3e4f-aaaa-5b6c-8d9e-0f1a2b3c4d5e"
MIG_2 = "MIG-9e8d7c6b-bbbb-4a39-8271-6f5e4d3c2b1a"


def container(name: str, devices: Mapping[str, Iterable[str]] | None = None) -> ContainerAllocation:
    return ContainerAllocation(
        name, tuple(DeviceAllocation(r, tuple(ids)) for r, ids in (devices or {}).items())
    )


def pod(namespace: str, name: str, *containers: ContainerAllocation) -> PodAllocation:
    return PodAllocation(namespace, name, containers)


def allocatable(resources: Mapping[str, Iterable[str]]) -> tuple[DeviceAllocation, ...]:
    return tuple(DeviceAllocation(r, tuple(ids)) for r, ids in resources.items())


class FakePodResources:
    """A PodResourcesClient answering what the test set, or raising what it queued."""

    def __init__(self) -> None:
        self.pods: tuple[PodAllocation, ...] = ()
        self.devices: tuple[DeviceAllocation, ...] | None = None
        self.error: PodResourcesError | None = None
        self.list_calls = 0
        self.closed = 0

    def set(self, *pods: PodAllocation) -> None:
        self.pods = pods

    async def list(self) -> tuple[PodAllocation, ...]:
        self.list_calls += 1
        if self.error is not None:
            raise self.error
        return self.pods

    async def allocatable(self) -> tuple[DeviceAllocation, ...] | None:
        return self.devices

    async def close(self) -> None:
        self.closed += 1


def gpu(
    uuid: str, index: int = 0, *, points: int = 2, **extra: str | int | bool
) -> ResourceMetrics:
    """A GPU resource as the nvml receiver emits it, with `points` points."""
    resource: dict[str, str | int | float | bool] = {
        semconv.HW_ID: uuid,
        semconv.HW_TYPE: "gpu",
        semconv.HW_NAME: f"nvidia{index}",
        semconv.GPU_INDEX: str(index),
        semconv.HW_VENDOR: "NVIDIA",
        **extra,
    }
    return _rm(resource, points)


def mig(uuid: str, parent: str, gi: int, ci: int = 0, *, points: int = 1) -> ResourceMetrics:
    """A MIG instance resource."""
    resource: dict[str, str | int | float | bool] = {
        semconv.HW_ID: uuid,
        semconv.HW_TYPE: "gpu",
        semconv.HW_PARENT: parent,
        semconv.MIG_PROFILE: "1g.10gb",
        semconv.MIG_GPU_INSTANCE_ID: str(gi),
        semconv.MIG_COMPUTE_INSTANCE_ID: str(ci),
    }
    return _rm(resource, points)


def _rm(resource: dict[str, str | int | float | bool], points: int) -> ResourceMetrics:
    pts = tuple(
        NumberDataPoint(attributes={}, time_unix_nano=1, value=float(i)) for i in range(points)
    )
    metric = Metric(
        name="hw.gpu.utilization", unit="1", description="", kind=MetricKind.GAUGE, points=pts
    )
    # The identity the nvml receiver gives: the device's UUID, or (UUID, pid) for a process.
    pid = resource.get(semconv.PROCESS_PID)
    uuid = resource[semconv.HW_ID]
    return ResourceMetrics(
        resource=resource, metrics=(metric,), identity=uuid if pid is None else (uuid, pid)
    )


def make_processor(
    telemetry: SelfTelemetry,
    client: FakePodResources,
    clock: FakeClock,
    *,
    environ: Mapping[str, str] | None = None,
    **config: object,
) -> K8sAttributesProcessor:
    settings = make_settings("k8s_attributes", Kind.PROCESSOR, telemetry)
    return K8sAttributesProcessor(
        settings,
        K8sAttributesProcessorConfig.model_validate(config),
        client=client,
        clock=clock,
        environ={"K8S_NODE_NAME": "node-a"} if environ is None else environ,
        rng=random.Random(7),
    )


def series(telemetry: SelfTelemetry, name: str, **attrs: str) -> float | None:
    """The value of one self-telemetry series (summed over matching points), None if absent."""
    values = [
        p.value
        for m in telemetry.collect().metrics
        if m.name == name
        for p in m.points
        if all(p.attributes.get(k) == v for k, v in attrs.items())
    ]
    return float(sum(values)) if values else None


def is_allocation(rm: ResourceMetrics) -> bool:
    return any(m.name == semconv.GPU_ALLOCATION for m in rm.metrics)


def holders_of(batch: tuple[ResourceMetrics, ...], uuid: str) -> list[tuple[object, ...]]:
    """(namespace, pod, container) of every device resource `uuid` in `batch` (one, unless
    something copies devices: the allocation series, and the marker that empties them when
    the last holder left, are not counted here)."""
    return [
        (
            rm.resource.get(semconv.K8S_NAMESPACE_NAME),
            rm.resource.get(semconv.K8S_POD_NAME),
            rm.resource.get(semconv.K8S_CONTAINER_NAME),
        )
        for rm in batch
        if rm.resource.get(semconv.HW_ID) == uuid and rm.metrics and not is_allocation(rm)
    ]


def allocations_of(batch: tuple[ResourceMetrics, ...], uuid: str) -> list[tuple[object, ...]]:
    """(namespace, pod, container, share, replica) of each allocation series of `uuid`."""
    return [
        (
            rm.resource.get(semconv.K8S_NAMESPACE_NAME),
            rm.resource.get(semconv.K8S_POD_NAME),
            rm.resource.get(semconv.K8S_CONTAINER_NAME),
            rm.metrics[0].points[0].value,
            rm.resource.get(semconv.GPU_REPLICA),
        )
        for rm in batch
        if rm.resource.get(semconv.HW_ID) == uuid and is_allocation(rm)
    ]
