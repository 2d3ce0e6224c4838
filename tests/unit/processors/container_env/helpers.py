"""Building blocks for the container_env unit tests: a config, a processor, a GPU resource."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.container_env.runtime import ContainerRuntime
from tests.conftest import make_settings
from tests.fakes import FakeClock
from tests.unit.processors.container_env.fake_runtime import FakeRuntime

# Every key that starts with an ASCII letter or digit, in globs that each have a literal part:
# what env and annotations accept where a test means "every key" (a bare `*` is refused there).
EVERY_KEY = {"include": [f"{ch}*" for ch in string.ascii_letters + string.digits]}


def config(**options: Any) -> ContainerEnvProcessorConfig:
    return ContainerEnvProcessorConfig.model_validate(options)


def make_processor(
    telemetry: SelfTelemetry,
    runtimes: Sequence[tuple[FakeRuntime, bool]],
    clock: FakeClock | None = None,
    **options: Any,
) -> ContainerEnvProcessor:
    def factory(_: ContainerEnvProcessorConfig) -> Sequence[tuple[ContainerRuntime, bool]]:
        return list(runtimes)

    settings = make_settings("container_env", Kind.PROCESSOR, telemetry)
    return ContainerEnvProcessor(settings, config(**options), factory, clock=clock)


def gpu(points: int = 2, **resource: str) -> ResourceMetrics:
    """A GPU resource with `points` points, plus the given resource attributes."""
    pts = tuple(
        NumberDataPoint(attributes={"i": i}, time_unix_nano=1, value=0.5) for i in range(points)
    )
    metric = Metric(
        name="hw.gpu.utilization", unit="1", description="", kind=MetricKind.GAUGE, points=pts
    )
    attrs = {"hw.id": "GPU-0", "hw.type": "gpu", **resource}
    return ResourceMetrics(resource=attrs, metrics=(metric,))


def by_workload(ns: str, pod: str, container: str, points: int = 2) -> ResourceMetrics:
    return gpu(
        points,
        **{"k8s.namespace.name": ns, "k8s.pod.name": pod, "k8s.container.name": container},
    )


def by_id(container_id: str, points: int = 2) -> ResourceMetrics:
    return gpu(points, **{"container.id": container_id})


def counter(telemetry: SelfTelemetry, name: str, **attrs: str) -> float:
    """The sum of a counter's (or gauge's) series that carry `attrs` (0 when none)."""
    return sum(
        point.value
        for metric in telemetry.collect().metrics
        if metric.name == name
        for point in metric.points
        if all(point.attributes.get(k) == v for k, v in attrs.items())
    )


def one(batch: Batch) -> dict[str, object]:
    assert len(batch) == 1
    return dict(batch[0].resource)
