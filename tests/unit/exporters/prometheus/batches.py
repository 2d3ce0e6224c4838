"""Hand-built batches in the shape the nvml receiver and the enrichment processors produce."""

from __future__ import annotations

from otelgpu.pdata import semconv
from otelgpu.pdata.model import (
    AttrValue,
    Batch,
    Metric,
    MetricKind,
    NumberDataPoint,
    ResourceMetrics,
)


def gpu(index: int, **extra: AttrValue) -> dict[str, AttrValue]:
    """A GPU's resource attributes, as the nvml receiver sets them, plus `extra`."""
    return {
        semconv.HW_ID: f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000",
        semconv.HW_TYPE: "gpu",
        semconv.HW_NAME: f"nvidia{index}",
        semconv.HW_MODEL: "NVIDIA H100 80GB HBM3",
        semconv.HW_VENDOR: "NVIDIA",
        semconv.GPU_INDEX: str(index),
        semconv.GPU_PCI_BUS_ID: f"00000000:{index + 0x10:02X}:00.0",
        semconv.HW_DRIVER_VERSION: "550.54.15",
        semconv.HOST_NAME: "gpu-node-1",
        **extra,
    }


def held_by(pod: str, namespace: str = "ml", container: str = "trainer") -> dict[str, str]:
    """What k8s_attributes adds for the container holding a GPU."""
    return {
        semconv.K8S_POD_NAME: pod,
        semconv.K8S_NAMESPACE_NAME: namespace,
        semconv.K8S_CONTAINER_NAME: container,
    }


def gauge(
    name: str, unit: str, value: float, attributes: dict[str, AttrValue] | None = None
) -> Metric:
    point = NumberDataPoint(attributes=attributes or {}, time_unix_nano=1, value=value)
    return Metric(
        name=name, unit=unit, description=f"{name} help", kind=MetricKind.GAUGE, points=(point,)
    )


def counter(name: str, unit: str, *points: tuple[dict[str, AttrValue], float]) -> Metric:
    return Metric(
        name=name,
        unit=unit,
        description=f"{name} help",
        kind=MetricKind.SUM,
        monotonic=True,
        points=tuple(
            NumberDataPoint(attributes=a, time_unix_nano=1, start_time_unix_nano=0, value=v)
            for a, v in points
        ),
    )


def gpu_metrics(utilization: float = 0.5) -> tuple[Metric, ...]:
    """A few catalog metrics of one GPU, in the catalog's OTel units."""
    return (
        gauge("hw.gpu.utilization", "1", utilization, {"hw.gpu.task": "general"}),
        gauge("hw.gpu.memory.usage", "By", 2 * 2**30),
        gauge("nvidia.gpu.sm.clock", "Hz", 1_980_000_000),
        gauge("hw.temperature", "Cel", 41, {"hw.sensor_location": "gpu"}),
        gauge("hw.power", "W", 312.5),
        counter("hw.energy", "J", ({}, 1234.5)),
        counter(
            "hw.errors", "{error}", ({"error.type": "corrected"}, 3),
            ({"error.type": "uncorrected"}, 1),
        ),
    )  # fmt: skip


def batch(*resources: dict[str, AttrValue], utilization: float = 0.5) -> Batch:
    """One ResourceMetrics per resource, each with `gpu_metrics()`."""
    return tuple(
        ResourceMetrics(resource=r, metrics=gpu_metrics(utilization), scope="otelgpu.nvml")
        for r in resources
    )
