"""P4: the enrichment cost of one cycle does not grow with the node's pod count.

Measures the CPU time of `K8sAttributesProcessor.process` on the same GPU batch (8 GPUs,
two of them with 3 MIG instances, 24 metrics per resource) with the snapshot built from a
node of 10 pods and from a node of 1000 pods (the same 8 + 6 devices held; the other pods
hold no GPU, as on a busy node). Rounds alternate between the two so machine noise hits
both alike. Also prints, for reference, the background snapshot build time at each size.

Target: CPU per cycle at 1000 pods / at 10 pods ≤ 1.2.
Run: python bench/p4_enrichment_scaling.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otelgpu import semconv
from otelgpu.component import ComponentID, Kind, Settings
from otelgpu.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.pod_resources import (
    ContainerAllocation,
    DeviceAllocation,
    PodAllocation,
)
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.processors.k8s_attributes.snapshot import ResourceFilter, build_snapshot
from otelgpu.telemetry import SelfTelemetry

GPUS, MIG_GPUS, MIG_PER_GPU, METRICS = 8, 2, 3, 24
CYCLES, ROUNDS = 2000, 7


def _uuid(i: int) -> str:
    return f"GPU-{i:08x}-0000-4000-8000-{i:012x}"


def _mig(i: int, gi: int) -> str:
    return f"MIG-{i:08x}-{gi:04x}-4000-8000-{i:012x}"


def node(pods: int) -> tuple[tuple[PodAllocation, ...], tuple[DeviceAllocation, ...]]:
    """`pods` pods: the first 10 hold the GPUs and MIG instances, the rest nothing."""
    held = [_uuid(i) for i in range(MIG_GPUS, GPUS)]
    held += [_mig(i, gi) for i in range(MIG_GPUS) for gi in range(MIG_PER_GPU)]
    out = []
    for p in range(pods):
        ids = tuple(d for n, d in enumerate(held) if n % 10 == p)
        devices = (DeviceAllocation("nvidia.com/gpu", ids),) if ids else ()
        containers = (ContainerAllocation("main", devices), ContainerAllocation("sidecar", ()))
        out.append(PodAllocation(f"ns-{p % 20}", f"pod-{p}", containers))
    return tuple(out), (DeviceAllocation("nvidia.com/gpu", tuple(held)),)


def batch() -> Batch:
    points = (NumberDataPoint(attributes={}, time_unix_nano=1, value=1.0),)
    metrics = tuple(
        Metric(name=f"m{i}", unit="1", description="", kind=MetricKind.GAUGE, points=points)
        for i in range(METRICS)
    )
    out = []
    for i in range(GPUS):
        resource = {semconv.HW_ID: _uuid(i), semconv.HW_NAME: f"nvidia{i}"}
        resource |= {semconv.GPU_INDEX: str(i), semconv.HW_TYPE: "gpu"}
        out.append(ResourceMetrics(resource=resource, metrics=metrics))
        for gi in range(MIG_PER_GPU if i < MIG_GPUS else 0):
            mig = {semconv.HW_ID: _mig(i, gi), semconv.HW_PARENT: _uuid(i)}
            mig |= {semconv.MIG_GPU_INSTANCE_ID: str(gi), semconv.MIG_COMPUTE_INSTANCE_ID: "0"}
            out.append(ResourceMetrics(resource=mig, metrics=metrics))
    return tuple(out)


class _Static:
    """An in-memory PodResourcesClient: the benchmark measures process(), not gRPC."""

    def __init__(self, pods: int) -> None:
        self._pods, self._alloc = node(pods)

    async def list(self) -> tuple[PodAllocation, ...]:
        return self._pods

    async def allocatable(self) -> tuple[DeviceAllocation, ...] | None:
        return self._alloc

    async def close(self) -> None:
        pass


async def processor(pods: int) -> K8sAttributesProcessor:
    telemetry = SelfTelemetry()
    settings = Settings.for_component(ComponentID("k8s_attributes"), Kind.PROCESSOR, telemetry)
    config = K8sAttributesProcessorConfig.model_validate(
        {"node_name": "node-a", "refresh_interval": "1h"}
    )
    proc = K8sAttributesProcessor(settings, config, client=_Static(pods))
    await proc.start(_Host(telemetry))
    while proc.snapshot is None:
        await asyncio.sleep(0)
    return proc


class _Host:
    def __init__(self, telemetry: SelfTelemetry) -> None:
        self.telemetry = telemetry

    def readiness(self) -> tuple[bool, list[str]]:
        return True, []


def cpu_per_cycle(proc: K8sAttributesProcessor, b: Batch) -> float:
    started = time.process_time()
    for _ in range(CYCLES):
        proc.process(b)
    return (time.process_time() - started) / CYCLES


def build_time(pods: int) -> float:
    listed, alloc = node(pods)
    wanted = ResourceFilter(["nvidia.com/gpu", "nvidia.com/mig-*"])
    started = time.process_time()
    for _ in range(20):
        build_snapshot(listed, alloc, wanted=wanted, id_type="auto", node_name="node-a")
    return (time.process_time() - started) / 20


async def main() -> None:
    small, large = await processor(10), await processor(1000)
    b = batch()
    out_small, out_large = small.process(b), large.process(b)
    assert out_small == out_large, "both nodes must label the batch the same way"
    labelled = sum(semconv.K8S_POD_NAME in rm.resource for rm in out_large)
    for p in (small, large):
        cpu_per_cycle(p, b)  # warm-up
    times: dict[int, list[float]] = {10: [], 1000: []}
    for _ in range(ROUNDS):
        times[10].append(cpu_per_cycle(small, b))
        times[1000].append(cpu_per_cycle(large, b))
    await small.shutdown()
    await large.shutdown()
    t10, t1000 = statistics.median(times[10]), statistics.median(times[1000])
    points = sum(len(m.points) for rm in b for m in rm.metrics)
    print(
        f"batch: {len(b)} resources, {points} points in; {len(out_large)} resources out, "
        f"{labelled} of them labelled (MIG parents: one copy per holder)"
    )
    print(
        f"snapshot build (background, per refresh): 10 pods {build_time(10) * 1e3:.3f} ms, "
        f"1000 pods {build_time(1000) * 1e3:.3f} ms"
    )
    print(f"process() CPU per cycle, 10 pods:   {t10 * 1e6:.1f} µs (median of {ROUNDS} x {CYCLES})")
    print(f"process() CPU per cycle, 1000 pods: {t1000 * 1e6:.1f} µs")
    print(f"P4 ratio 1000 pods / 10 pods: {t1000 / t10:.3f} (target <= 1.2)")


if __name__ == "__main__":
    asyncio.run(main())
