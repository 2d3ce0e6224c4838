"""`shared_gpu_series: per_holder` on a time-sliced GPU follows dcgm-exporter 4.8's rule for
`--kubernetes-virtual-gpus` (its #594, transformation/process_metrics.go): the device-level
GPU_UTIL and FB_USED series stay, each holder gets its own GPU_UTIL and FB_USED from its
processes' readings (0 for a holder with none), and every other field is copied once per
holder (those copies double count, as dcgm-exporter's do). `device` mode keeps one series per
GPU and carries no pod on a shared GPU."""

from __future__ import annotations

from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue, Batch, ResourceMetrics
from tests.unit.exporters.prometheus.batches import gauge, gpu, held_by
from tests.unit.exporters.prometheus.test_dcgm_labels import ingested, labels_of, sample
from tests.unit.exporters.prometheus.translators import make_translator

GiB = 2**30
SHARED = {semconv.GPU_SHARED: True, semconv.GPU_HOLDERS: 3}
UUID0 = gpu(0)[semconv.HW_ID]


def shared_gpu(utilization: float = 0.44, memory: int = 30 * GiB) -> ResourceMetrics:
    """GPU 0 as the nvml receiver reads it: device-level utilization, memory and power."""
    metrics = (
        gauge("hw.gpu.utilization", "1", utilization, {"hw.gpu.task": "general"}),
        gauge("hw.gpu.memory.usage", "By", memory),
        gauge("hw.power", "W", 400.0),
    )
    return ResourceMetrics(resource=gpu(0, **SHARED), metrics=metrics, identity=UUID0)


def holder(pod: str, replica: str) -> ResourceMetrics:
    """One holder's allocation series, as k8s_attributes sends it."""
    resource = gpu(0, **held_by(pod), **SHARED, **{semconv.GPU_REPLICA: replica})
    return ResourceMetrics(
        resource=resource,
        metrics=(gauge(semconv.GPU_ALLOCATION, "1", 1 / 3),),
        identity=(semconv.GPU_ALLOCATION, UUID0),
    )


def process(pid: int, pod: str, utilization: float, memory: int) -> ResourceMetrics:
    """One process on GPU 0, labelled with its pod (container_env, by its container)."""
    resource: dict[str, AttrValue] = {
        **gpu(0, **held_by(pod)),
        semconv.PROCESS_PID: pid,
        semconv.CONTAINER_ID: f"c{pid}",
    }
    metrics = (
        gauge("nvidia.gpu.process.memory.usage", "By", memory),
        gauge("nvidia.gpu.process.utilization", "1", utilization, {"hw.gpu.task": "general"}),
        gauge("nvidia.gpu.process.utilization", "1", 0.0, {"hw.gpu.task": "encoder"}),
    )
    return ResourceMetrics(resource=resource, metrics=metrics, identity=(UUID0, pid))


HOLDERS = (holder("a", "0"), holder("b", "1"), holder("c", "2"))
PROCESSES = (
    process(101, "a", 0.10, 5 * GiB),
    process(102, "a", 0.06, 3 * GiB),  # a pod's processes add up
    process(201, "b", 0.24, 12 * GiB),
    process(301, "c", 0.04, 2 * GiB),
)


def by_pod(lines: list[str]) -> dict[str, str]:
    """Series value by `pod` label ("" for the device-level series)."""
    found: dict[str, str] = {}
    for line in lines:
        pod = labels_of(line).get("pod", "")
        assert pod not in found, f"two series for pod {pod!r}"
        found[pod] = sample(line)
    return found


def served(data: Batch, mode: str = "per_holder") -> dict[str, list[str]]:
    return ingested(make_translator("dcgm", shared_gpu_series=mode), SeriesStore(), data)


def test_each_holder_gets_its_own_utilization_and_memory_from_its_processes() -> None:
    lines = served((shared_gpu(), *HOLDERS, *PROCESSES))
    assert by_pod(lines["DCGM_FI_DEV_GPU_UTIL"]) == {"": "44", "a": "16", "b": "24", "c": "4"}
    assert by_pod(lines["DCGM_FI_DEV_FB_USED"]) == {
        "": "30720",
        "a": "8192",
        "b": "12288",
        "c": "2048",
    }


def test_other_fields_are_copied_once_per_holder_without_the_device_level_series() -> None:
    lines = served((shared_gpu(), *HOLDERS, *PROCESSES))
    power = by_pod(lines["DCGM_FI_DEV_POWER_USAGE"])
    assert power == {"a": "400.000000", "b": "400.000000", "c": "400.000000"}
    copies = [labels_of(x) for x in lines["DCGM_FI_DEV_POWER_USAGE"]]
    assert sorted(c["vgpu"] for c in copies) == ["0", "1", "2"]


def test_a_holder_without_a_process_reads_0() -> None:
    lines = served((shared_gpu(), *HOLDERS, *PROCESSES[:3]))  # c runs nothing
    assert by_pod(lines["DCGM_FI_DEV_GPU_UTIL"])["c"] == "0"
    assert by_pod(lines["DCGM_FI_DEV_FB_USED"])["c"] == "0"


def test_without_process_readings_no_holder_gets_a_share_it_cannot_know() -> None:
    """No per-process reading of the GPU in the batch (no process runs, or the receiver's
    `processes` is off): the device-level series only, no per-holder 0 that would claim it."""
    lines = served((shared_gpu(), *HOLDERS))
    assert by_pod(lines["DCGM_FI_DEV_GPU_UTIL"]) == {"": "44"}
    assert by_pod(lines["DCGM_FI_DEV_FB_USED"]) == {"": "30720"}
    assert len(lines["DCGM_FI_DEV_POWER_USAGE"]) == 3


def test_device_mode_keeps_one_series_per_gpu_and_no_pod_on_a_shared_gpu() -> None:
    lines = served((shared_gpu(), *HOLDERS, *PROCESSES), mode="device")
    assert by_pod(lines["DCGM_FI_DEV_GPU_UTIL"]) == {"": "44"}
    assert by_pod(lines["DCGM_FI_DEV_POWER_USAGE"]) == {"": "400.000000"}


def test_a_holder_that_leaves_takes_its_series_at_once() -> None:
    translator, store = make_translator("dcgm", shared_gpu_series="per_holder"), SeriesStore()
    ingested(translator, store, (shared_gpu(), *HOLDERS, *PROCESSES))
    lines = ingested(translator, store, (shared_gpu(), *HOLDERS[:2], *PROCESSES[:3]))
    assert set(by_pod(lines["DCGM_FI_DEV_GPU_UTIL"])) == {"", "a", "b"}
    assert set(by_pod(lines["DCGM_FI_DEV_POWER_USAGE"])) == {"a", "b"}


def test_a_reading_the_processes_lack_gives_no_holder_a_share_of_it() -> None:
    """Per-process memory on, per-process utilization off: each holder has its memory, and
    no utilization it cannot know."""
    memory_only = tuple(
        ResourceMetrics(
            resource=p.resource,
            metrics=tuple(m for m in p.metrics if m.name == "nvidia.gpu.process.memory.usage"),
            identity=p.identity,
        )
        for p in PROCESSES
    )
    lines = served((shared_gpu(), *HOLDERS, *memory_only))
    assert by_pod(lines["DCGM_FI_DEV_GPU_UTIL"]) == {"": "44"}
    assert by_pod(lines["DCGM_FI_DEV_FB_USED"])["b"] == "12288"
