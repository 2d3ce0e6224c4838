"""k8s_attributes against a real gRPC pod-resources v1 server on a unix socket (R3, R5).

The server is `tests.peers.kubelet.FakeKubelet`: the kubelet's wire protocol from the
project's stubs, with scripted answers. Waits poll with a deadline; none asserts a time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import grpc
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.pod_resources import (
    GrpcPodResourcesClient,
    PodResourcesError,
)
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.receivers.nvml.config import SimulatedConfig
from otelgpu.receivers.nvml.devices import discover
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.peers.kubelet import FakeKubelet, claim, claim_device, container, kubelet, pod
from tests.unit.processors.k8s_attributes.fakes import (
    MIG_1,
    MIG_2,
    UUID_A,
    UUID_B,
    allocations_of,
    gpu,
    holders_of,
    mig,
    series,
)

__all__ = ["kubelet"]  # the pytest fixture, imported for use here

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
UUID_C = "GPU-c0c0c0c0-3333-4d39-9e40-7fc1cdd73985"
UUID_D = "GPU-d0d0d0d0-4444-4e4a-8f51-80d2dee84a96"


async def wait_for(check: Callable[[], object], timeout: float = 10.0) -> None:
    """Polls `check` until it is truthy; fails naming it after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.02)


async def start_processor(
    telemetry: SelfTelemetry, kubelet: FakeKubelet, **config: object
) -> K8sAttributesProcessor:
    values = {
        "pod_resources_socket": str(kubelet.socket),
        "refresh_interval": "100ms",
        "timeout": "300ms",
        "node_name": "node-a",
        **config,
    }
    settings = make_settings("k8s_attributes", Kind.PROCESSOR, telemetry)
    processor = K8sAttributesProcessor(
        settings, K8sAttributesProcessorConfig.model_validate(values)
    )
    await processor.start(FakeHost(telemetry))
    return processor


def labelled(processor: K8sAttributesProcessor, rm, uuid: str) -> list[tuple[object, ...]]:
    return holders_of(processor.process((rm,)), uuid)


async def test_every_device_id_form(telemetry, kubelet):
    kubelet.set_pods(
        *(pod("ml", f"infer-{i}", container("srv", {GPU: [f"{UUID_A}::{i}"]})) for i in (0, 1)),
        pod("ml", "by-index", container("c", {GPU: ["1"]})),
        pod("ml", "by-name", container("c", {GPU: ["nvidia2"]})),
        pod("ml", "mig-uuid", container("c", {"nvidia.com/mig-1g.10gb": [MIG_1]})),
        pod("ml", "mig-legacy", container("c", {"nvidia.com/mig-1g.10gb": [f"MIG-{UUID_D}/2/0"]})),
        pod("ml", "gke-mig", container("c", {GPU: ["nvidia3/gi5"]})),
    )
    processor = await start_processor(telemetry, kubelet)
    await wait_for(lambda: processor.snapshot is not None)
    gke_mig = mig("MIG-gke", UUID_D, 5)
    batch = (
        gpu(UUID_A, 0),
        gpu(UUID_B, 1),
        gpu(UUID_C, 2),
        gpu(UUID_D, 3),
        mig(MIG_1, UUID_D, 1),
        mig(MIG_2, UUID_D, 2),
        gke_mig,
    )
    out = processor.process(batch)
    assert holders_of(out, UUID_A) == [(None, None, None)]  # shared: no single holder's labels
    assert [a[:3] for a in allocations_of(out, UUID_A)] == [
        ("ml", "infer-0", "srv"),
        ("ml", "infer-1", "srv"),
    ]
    assert holders_of(out, UUID_B) == [("ml", "by-index", "c")]
    assert holders_of(out, UUID_C) == [("ml", "by-name", "c")]
    assert holders_of(out, MIG_1) == [("ml", "mig-uuid", "c")]
    assert holders_of(out, MIG_2) == [("ml", "mig-legacy", "c")]
    assert holders_of(out, "MIG-gke") == [("ml", "gke-mig", "c")]
    assert holders_of(out, UUID_D) == [(None, None, None)]  # MIG-enabled: held by its instances
    assert all(rm.resource[semconv.K8S_NODE_NAME] == "node-a" for rm in out)
    await processor.shutdown()


async def test_sidecars_and_init_containers(telemetry, kubelet):
    kubelet.set_pods(
        pod(
            "ml",
            "train-0",
            container("init-weights", {GPU: [UUID_A]}),
            container("trainer", {GPU: [UUID_A]}),
            container("istio-proxy"),
        )
    )
    processor = await start_processor(telemetry, kubelet)
    await wait_for(lambda: processor.snapshot is not None)
    assert labelled(processor, gpu(UUID_A), UUID_A) == [("ml", "train-0", "trainer")]
    await processor.shutdown()


async def test_pod_going_away_and_gpu_reused(telemetry, kubelet):
    kubelet.set_pods(pod("ml", "old", container("c", {GPU: [UUID_A]})))
    processor = await start_processor(telemetry, kubelet)
    await wait_for(lambda: labelled(processor, gpu(UUID_A), UUID_A) == [("ml", "old", "c")])
    kubelet.set_pods()
    await wait_for(lambda: labelled(processor, gpu(UUID_A), UUID_A) == [(None, None, None)])
    kubelet.set_pods(pod("team-b", "new", container("c", {GPU: [UUID_A]})))
    await wait_for(lambda: labelled(processor, gpu(UUID_A), UUID_A) != [(None, None, None)])
    assert labelled(processor, gpu(UUID_A), UUID_A) == [("team-b", "new", "c")]
    await processor.shutdown()


async def test_kubelet_restart_replaces_the_socket(telemetry, kubelet):
    kubelet.set_pods(pod("ml", "before", container("c", {GPU: [UUID_A]})))
    processor = await start_processor(telemetry, kubelet)
    await wait_for(lambda: labelled(processor, gpu(UUID_A), UUID_A) == [("ml", "before", "c")])
    await kubelet.restart()  # old socket unlinked, a new one (new inode) at the same path
    kubelet.calls.clear()
    kubelet.set_pods(pod("ml", "after", container("c", {GPU: [UUID_A]})))
    await wait_for(lambda: labelled(processor, gpu(UUID_A), UUID_A) == [("ml", "after", "c")])
    assert kubelet.count("List") >= 1
    assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 1
    await processor.shutdown()


async def test_missing_socket_is_reported_once_then_recovers(telemetry, caplog):
    caplog.set_level(logging.WARNING, logger="otelgpu.telemetry")
    kubelet = FakeKubelet()  # not started: no socket yet
    try:
        kubelet.set_pods(pod("ml", "p", container("c", {GPU: [UUID_A]})))
        processor = await start_processor(telemetry, kubelet)
        errors = "otelgpu_pod_resources_errors_total"
        await wait_for(lambda: (series(telemetry, errors, code="SOCKET_MISSING") or 0) >= 2)
        assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 0
        out = processor.process((gpu(UUID_A, points=2),))
        assert holders_of(out, UUID_A) == [(None, None, None)]
        assert series(telemetry, "otelgpu_enrichment_unmatched_points_total") == 2
        down = [r for r in caplog.records if "pod_resources is down" in r.getMessage()]
        assert len(down) == 1
        await kubelet.start()
        await wait_for(lambda: labelled(processor, gpu(UUID_A), UUID_A) == [("ml", "p", "c")])
        await processor.shutdown()
    finally:
        await kubelet.close()


async def test_slow_kubelet_times_out_and_the_last_snapshot_is_served(telemetry, kubelet):
    kubelet.set_pods(pod("ml", "p", container("c", {GPU: [UUID_A]})))
    processor = await start_processor(telemetry, kubelet, timeout="200ms")
    await wait_for(lambda: processor.snapshot is not None)
    kubelet.delay = 2.0  # the kubelet now answers in 2 s; the client gives up at 200 ms
    errors = "otelgpu_pod_resources_errors_total"
    await wait_for(lambda: series(telemetry, errors, code="DEADLINE_EXCEEDED"))
    assert labelled(processor, gpu(UUID_A), UUID_A) == [("ml", "p", "c")]
    assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 0
    age = "otelgpu_pod_resources_snapshot_age_seconds"
    await wait_for(lambda: (series(telemetry, age) or 0) >= 0.3)
    await processor.shutdown()


async def test_resource_exhausted_backs_off(telemetry, kubelet):
    kubelet.set_pods(pod("ml", "p", container("c", {GPU: [UUID_A]})))
    kubelet.limit_rate(qps=0.001, burst=2)  # one refresh (List + allocatable), then throttled
    processor = await start_processor(telemetry, kubelet, refresh_interval="500ms")
    await wait_for(lambda: processor.snapshot is not None)
    errors = "otelgpu_pod_resources_errors_total"
    await wait_for(lambda: series(telemetry, errors, code="RESOURCE_EXHAUSTED"))
    started = kubelet.count("List")
    begun = time.monotonic()
    deadline = begun + 2.5
    while time.monotonic() < deadline:  # unknown devices keep asking for early refreshes
        processor.process((gpu("GPU-unknown", 9),))
        await asyncio.sleep(0.05)
    # While throttled it asks no more often than a healthy refresher (once per 500 ms, the
    # back-off never waits longer), and the 50 early refreshes asked for are not made.
    elapsed = time.monotonic() - begun
    assert kubelet.count("List") - started <= elapsed / 0.5 + 1
    assert labelled(processor, gpu(UUID_A), UUID_A) == [("ml", "p", "c")]
    await processor.shutdown()


async def test_get_allocatable_not_served(telemetry, kubelet):
    kubelet.allocatable_served = False
    kubelet.set_pods(pod("ml", "p", container("c", {GPU: [UUID_A]})))
    processor = await start_processor(telemetry, kubelet)
    await wait_for(lambda: kubelet.count("List") >= 3)
    assert kubelet.count("GetAllocatableResources") == 1  # asked once per connection
    assert labelled(processor, gpu(UUID_A), UUID_A) == [("ml", "p", "c")]
    processor.process((gpu(UUID_B, 1, points=2),))
    points = series(telemetry, "otelgpu_enrichment_unmatched_points_total", reason="not_allocated")
    assert points == 2
    await processor.shutdown()


async def test_big_answers_fit_the_receive_limit(kubelet):
    big_id = "GPU-" + "f" * 1000
    kubelet.set_pods(
        *(
            pod("ml", f"p{i}", container("c", {GPU: [f"{big_id}::{j}" for j in range(10)]}))
            for i in range(600)
        )
    )  # about 6 MB: over gRPC's 4 MiB default
    client = GrpcPodResourcesClient(
        str(kubelet.socket), timeout=5, max_receive_message_size=16 << 20
    )
    assert len(await client.list()) == 600
    await client.close()
    small = GrpcPodResourcesClient(str(kubelet.socket), timeout=5, max_receive_message_size=1 << 20)
    with pytest.raises(PodResourcesError) as info:
        await small.list()
    assert info.value.code == "RESOURCE_EXHAUSTED"
    await small.close()


async def test_client_redials_after_unavailable_and_socket_removal(kubelet):
    kubelet.set_pods(pod("ml", "p", container("c", {GPU: [UUID_A]})))
    client = GrpcPodResourcesClient(
        str(kubelet.socket), timeout=2, max_receive_message_size=1 << 24
    )
    assert len(await client.list()) == 1
    kubelet.fail_next(grpc.StatusCode.UNAVAILABLE, "kubelet is shutting down")
    with pytest.raises(PodResourcesError) as info:
        await client.list()
    assert info.value.code == "UNAVAILABLE"
    assert len(await client.list()) == 1  # a fresh channel
    kubelet.remove_socket()
    with pytest.raises(PodResourcesError) as info:
        await client.list()
    assert info.value.code == "SOCKET_MISSING"
    await kubelet.restart()
    assert len(await client.list()) == 1
    await client.close()
    await client.close()  # idempotent


async def test_a_large_answer_is_parsed_and_indexed_off_the_event_loop(
    telemetry, kubelet, monkeypatch
):
    """The List answer is parsed and indexed in worker threads: on the event loop, 100k pods
    held /metrics for seconds."""
    from otelgpu.processors.k8s_attributes import pod_resources as module
    from otelgpu.processors.k8s_attributes import processor as processor_module

    threads: dict[str, str] = {}
    parse, build = module.parse_list, processor_module.build_snapshot

    def recording_parse(raw: bytes, *cache):
        threads["parse"] = threading.current_thread().name
        return parse(raw, *cache)

    def recording_build(*args, **kwargs):
        threads["build"] = threading.current_thread().name
        return build(*args, **kwargs)

    monkeypatch.setattr(module, "parse_list", recording_parse)
    monkeypatch.setattr(processor_module, "build_snapshot", recording_build)
    n = processor_module.OFF_LOOP_PODS + 50
    kubelet.set_pods(
        *(pod("ml", f"p{i}", container("c", {GPU: [f"{UUID_A}::{i}"]})) for i in range(n))
    )
    processor = await start_processor(telemetry, kubelet)
    assert processor.snapshot is not None  # start waited for the first answer
    assert processor.snapshot.pods == n
    loop_thread = threading.current_thread().name
    assert threads["parse"] != loop_thread and threads["build"] != loop_thread, threads
    await processor.shutdown()


async def test_names_longer_than_kubernetes_allows_are_cut(telemetry, kubelet):
    """A 70,000-character pod name from a (malicious) kubelet is cut before it reaches /metrics."""
    kubelet.set_pods(pod("ml", "p" * 70_000, container("c", {GPU: [UUID_A]})))
    processor = await start_processor(telemetry, kubelet)
    assert labelled(processor, gpu(UUID_A, 0), UUID_A) == [("ml", "p" * 253, "c")]
    await processor.shutdown()


UTILIZATION = Metric(
    name="hw.gpu.utilization",
    unit="1",
    description="",
    kind=MetricKind.GAUGE,
    points=(NumberDataPoint(attributes={}, time_unix_nano=1, value=0.5),),
)


def _simulated_resources() -> tuple[ResourceMetrics, ...]:
    """The resources the nvml receiver discovers on a simulated node where NVML index and
    minor number disagree (index 0 is /dev/nvidia1), the second GPU split in two MIG
    instances (placements 0 and 4)."""
    config = SimulatedConfig.model_validate(
        {
            "gpus": [
                {"minor": 1},
                {
                    "minor": 0,
                    "mig": [{"profile": "3g.40gb"}, {"profile": "3g.40gb", "placement_start": 4}],
                },
                {"minor": 2},
            ]
        }
    )
    client = SimulatedNvml(config, time.monotonic)
    client.init()
    found = discover(client, "all", "host-a", logging.getLogger("test"))
    return tuple(
        ResourceMetrics(
            resource=device.resource,
            metrics=(UTILIZATION,),  # any metric: only the resource matters
            identity=device.uuid,
        )
        for device in found
    )


async def test_dra_claims_label_the_gpu_by_minor_and_the_mig_instance(telemetry, kubelet):
    batch = _simulated_resources()
    by_minor = {
        rm.resource[semconv.GPU_MINOR]: rm.resource[semconv.HW_ID]
        for rm in batch
        if semconv.HW_PARENT not in rm.resource
    }
    (second_mig,) = [
        rm.resource[semconv.HW_ID]
        for rm in batch
        if rm.resource.get(semconv.MIG_PLACEMENT_START) == "4"
    ]
    kubelet.set_pods(
        pod(
            "ml", "train-0", container("trainer", None, claim("gpus", "ml", claim_device("gpu-1")))
        ),
        pod(
            "ml",
            "infer-0",
            container("srv", None, claim("mig", "ml", claim_device("gpu-0-mig-3g40gb-9-4"))),
        ),
        pod(
            "ml",
            "old-kubelet",
            container(
                "c",
                None,
                claim(
                    "g",
                    "ml",
                    claim_device("", driver="", pool="", cdi=["k8s.gpu.nvidia.com/device=gpu-2"]),
                ),
            ),
        ),
    )
    processor = await start_processor(telemetry, kubelet)
    try:
        await wait_for(lambda: processor.snapshot is not None)
        out = processor.process(batch)
        assert holders_of(out, by_minor["1"]) == [("ml", "train-0", "trainer")]
        assert by_minor["1"] == batch[0].resource[semconv.HW_ID]  # NVML index 0, minor 1
        assert holders_of(out, second_mig) == [("ml", "infer-0", "srv")]
        assert holders_of(out, by_minor["2"]) == [("ml", "old-kubelet", "c")]
        sources = {
            point.attributes[semconv.GPU_ALLOCATION_SOURCE]
            for rm in out
            if rm.metrics[0].name == semconv.GPU_ALLOCATION and semconv.K8S_POD_NAME in rm.resource
            for point in rm.metrics[0].points
        }
        assert sources == {"dra"}
    finally:
        await processor.shutdown()
