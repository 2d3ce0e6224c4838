"""The processor against a scripted client and a clock moved by hand."""

from __future__ import annotations

import logging

import pytest

from otelgpu.pdata import notes, semconv
from otelgpu.processors.k8s_attributes.pod_resources import PodResourcesError
from tests.fakes import FakeHost
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    MIG_1,
    MIG_2,
    UUID_A,
    UUID_B,
    allocations_of,
    container,
    gpu,
    holders_of,
    make_processor,
    mig,
    pod,
    series,
)

UNMATCHED = "otelgpu_enrichment_unmatched_points_total"
AGE = "otelgpu_pod_resources_snapshot_age_seconds"


async def test_labels_the_gpu_with_the_container_that_holds_it(started, client, clock):
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]}), container("sidecar")))
    await clock.advance(10)
    out = started.process((gpu(UUID_A, 0), gpu(UUID_B, 1)))
    assert holders_of(out, UUID_A) == [("ml", "train-0", "trainer")]
    assert holders_of(out, UUID_B) == [(None, None, None)]
    assert all(rm.resource[semconv.K8S_NODE_NAME] == "node-a" for rm in out)
    assert semconv.GPU_SHARED not in out[0].resource


async def test_idle_gpu_counts_as_not_allocated(started, telemetry, client):
    out = started.process((gpu(UUID_B, 1, points=3),))
    assert len(out) == 1
    assert series(telemetry, UNMATCHED, reason="not_allocated") == 3
    assert client.list_calls == 1  # a known idle GPU asks for no early refresh


async def test_no_snapshot_before_the_kubelet_answers(telemetry, client, clock):
    client.error = PodResourcesError("SOCKET_MISSING", "no socket at /x")
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)
    batch = (gpu(UUID_A, 0, points=4),)
    out = processor.process(batch)
    assert holders_of(out, UUID_A) == [(None, None, None)]
    assert series(telemetry, UNMATCHED, reason="no_snapshot") == 4
    assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 0
    assert series(telemetry, AGE) is None  # no snapshot, no age
    await processor.shutdown()


async def test_process_before_start_passes_the_batch_through(telemetry, client, clock):
    processor = make_processor(telemetry, client, clock)
    batch = (gpu(UUID_A, 0),)
    assert processor.process(batch) == batch
    await processor.shutdown()  # safe without start
    await processor.shutdown()


async def test_time_sliced_gpu_is_one_series_with_an_allocation_per_holder(started, client, clock):
    """A shared GPU stays one series: copied once per holder, its sums would count twice."""
    client.set(
        *(pod("ml", f"infer-{i}", container("srv", {GPU: [f"{UUID_A}::{i}"]})) for i in (0, 3))
    )
    await clock.advance(10)
    device = gpu(UUID_A, 0)
    out = started.process((device,))
    assert holders_of(out, UUID_A) == [(None, None, None)]  # one series, no holder's labels
    (shared,) = [rm for rm in out if rm.metrics == device.metrics]
    assert shared.resource[semconv.GPU_SHARED] is True
    assert shared.resource[semconv.GPU_HOLDERS] == 2
    assert shared.identity == device.identity
    assert allocations_of(out, UUID_A) == [
        ("ml", "infer-0", "srv", 0.5, "0"),
        ("ml", "infer-3", "srv", 0.5, "3"),
    ]
    shares = [rm for rm in out if rm.metrics != device.metrics]
    assert len({rm.identity for rm in shares}) == 1  # one set of series, replaced as a whole
    assert all(rm.resource[semconv.HW_ID] == UUID_A for rm in shares)


async def test_exclusive_gpu_has_the_holder_labels_and_a_whole_allocation(started, client, clock):
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    out = started.process((gpu(UUID_A, 0),))
    assert holders_of(out, UUID_A) == [("ml", "train-0", "trainer")]
    assert allocations_of(out, UUID_A) == [("ml", "train-0", "trainer", 1.0, None)]


async def test_a_gpu_passed_to_another_pod_is_labelled_with_the_new_pod_only(
    started, client, clock
):
    client.set(pod("ml", "old", container("c", {GPU: [UUID_A]})))
    await clock.advance(10)
    assert holders_of(started.process((gpu(UUID_A),)), UUID_A) == [("ml", "old", "c")]
    client.set()  # the pod is deleted
    await clock.advance(10)
    assert holders_of(started.process((gpu(UUID_A),)), UUID_A) == [(None, None, None)]
    client.set(pod("team-b", "new", container("c", {GPU: [UUID_A]})))
    await clock.advance(10)
    assert holders_of(started.process((gpu(UUID_A),)), UUID_A) == [("team-b", "new", "c")]


async def test_failed_refresh_serves_the_last_good_snapshot_and_its_age(
    started, telemetry, client, clock
):
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    client.error = PodResourcesError("DEADLINE_EXCEEDED", "slow kubelet")
    await clock.advance(35)
    assert holders_of(started.process((gpu(UUID_A),)), UUID_A) == [("ml", "train-0", "trainer")]
    assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 0
    age = series(telemetry, AGE, processor="k8s_attributes")
    assert age is not None and 34 <= age <= 36
    assert series(telemetry, "otelgpu_pod_resources_errors_total", code="DEADLINE_EXCEEDED")
    client.error = None
    await clock.advance(60)
    assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 1
    assert series(telemetry, AGE, processor="k8s_attributes") <= 10  # healthy: ≤ one interval


async def test_resource_exhausted_backs_off(started, client, clock):
    client.error = PodResourcesError("RESOURCE_EXHAUSTED", "rejected by rate limit")
    before = client.list_calls
    for _ in range(300):  # 5 minutes, asking for early refreshes all along
        started.process((gpu("GPU-unknown-to-the-kubelet", 7),))
        await clock.advance(1)
    calls = client.list_calls - before
    # 1, 2, 4, 8 s (±20 %), then the 10 s interval: no more than a healthy refresher asks
    # (30 in 5 minutes), never the 300 early refreshes the unknown device asked for.
    assert 30 <= calls <= 34
    assert started.refresher.backoff(1) <= 1.2 and started.refresher.backoff(30) == 10


async def test_labels_follow_a_recovered_kubelet_within_one_refresh_interval(
    started, client, clock
):
    """After minutes of RESOURCE_EXHAUSTED, a kubelet that answers again is read within one
    refresh interval: a pod created then is labelled that soon (not after the back-off)."""
    client.error = PodResourcesError("RESOURCE_EXHAUSTED", "rejected by rate limit")
    await clock.advance(300)
    client.error = None
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    assert holders_of(started.process((gpu(UUID_A),)), UUID_A) == [("ml", "train-0", "trainer")]


async def test_unknown_device_asks_for_one_early_refresh(started, telemetry, client, clock):
    await clock.advance(2)
    before = client.list_calls
    for _ in range(50):  # many batches within one second
        started.process((gpu("GPU-new", 4, points=1),))
    await clock.advance(1)
    assert client.list_calls == before + 1
    assert series(telemetry, UNMATCHED, reason="unknown_device") == 50
    for _ in range(3):  # still unknown after that refresh: no refresh every second
        started.process((gpu("GPU-new", 4, points=1),))
        await clock.advance(1)
    assert client.list_calls == before + 1


async def test_early_refreshes_are_at_most_one_per_second(started, client, clock):
    await clock.advance(2)
    before = client.list_calls
    for i in range(20):  # a new unknown device every 100 ms
        started.process((gpu(f"GPU-new-{i}", i),))
        await clock.advance(0.1)
    assert client.list_calls - before <= 2


async def test_mig_instances_are_matched_by_their_own_uuid(started, telemetry, client, clock):
    """A MIG holder labels its instance only: the parent GPU is never copied per MIG holder."""
    client.set(
        pod("ml", "a", container("c", {"nvidia.com/mig-1g.10gb": [MIG_1]})),
        pod("ml", "b", container("c", {"nvidia.com/mig-1g.10gb": [MIG_2]})),
    )
    await clock.advance(10)
    batch = (gpu(UUID_A, 0), mig(MIG_1, UUID_A, 1), mig(MIG_2, UUID_A, 2))
    out = started.process(batch)
    assert holders_of(out, MIG_1) == [("ml", "a", "c")]
    assert holders_of(out, MIG_2) == [("ml", "b", "c")]
    # The MIG-enabled GPU itself: once, with none of its instances' holders.
    assert holders_of(out, UUID_A) == [(None, None, None)]
    assert allocations_of(out, UUID_A) == []
    assert series(telemetry, UNMATCHED) is None  # held through its instances: no fault


async def test_mig_parent_is_never_counted_unmatched(started, telemetry, client):
    out = started.process((gpu("GPU-mig-parent", 3, points=2), mig(MIG_1, "GPU-mig-parent", 1)))
    assert len(out) == 2
    assert series(telemetry, UNMATCHED, reason="not_allocated") is None
    assert series(telemetry, UNMATCHED, reason="unknown_device") == 1  # the MIG instance


async def test_existing_attributes_are_never_overwritten(started, client, clock):
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A, UUID_B]})))
    await clock.advance(10)
    ns_set = gpu(UUID_A, 0, **{semconv.K8S_NAMESPACE_NAME: "given", semconv.K8S_NODE_NAME: "n"})
    pod_set = gpu(UUID_B, 1, **{semconv.K8S_POD_NAME: "someone"})
    out = started.process((ns_set, pod_set))
    assert out[0].resource[semconv.K8S_NAMESPACE_NAME] == "given"
    assert out[0].resource[semconv.K8S_NODE_NAME] == "n"
    assert out[0].resource[semconv.K8S_POD_NAME] == "train-0"
    assert out[-1] is pod_set  # already attributed by someone: left alone


async def test_process_series_are_never_labelled_by_the_allocation(started, client, clock):
    """A process on a GPU is never billed to whoever holds the GPU."""
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    proc = gpu(UUID_A, 0, points=1, **{semconv.PROCESS_PID: 4242})
    (out,) = started.process((proc,))
    assert holders_of((out,), UUID_A) == [(None, None, None)]
    assert out.resource[semconv.K8S_NODE_NAME] == "node-a"
    # What the allocation is goes along for container_env to check the process against.
    assert out.notes is not None
    assert out.notes[notes.GPU_HOLDERS] == {("ml", "train-0", "trainer")}


async def test_process_on_a_known_idle_gpu_notes_no_holders(started, client, clock):
    proc = gpu(UUID_B, 1, points=1, **{semconv.PROCESS_PID: 7})
    (out,) = started.process((proc,))
    assert out.notes is not None
    assert out.notes[notes.GPU_HOLDERS] == frozenset()


async def test_process_on_an_unknown_gpu_notes_nothing(started):
    proc = gpu("GPU-unknown", 5, points=1, **{semconv.PROCESS_PID: 7})
    (out,) = started.process((proc,))
    assert out.notes is None


async def test_non_gpu_resources_pass_untouched(started, telemetry):
    rm = gpu(UUID_A)
    other = type(rm)(resource={"service.name": "x"}, metrics=rm.metrics)
    assert started.process((other,)) == (other,)
    assert series(telemetry, UNMATCHED) is None


@pytest.mark.parametrize(
    ("device_id", "id_type", "resource"),
    [
        ("0", "auto", gpu("GPU-x", 0)),
        ("nvidia1", "auto", gpu("GPU-x", 1)),
        ("nvidia1/vgpu3", "auto", gpu("GPU-x", 1)),
        ("GPU-x", "uuid", gpu("GPU-x", 0)),
        ("2", "index", gpu("GPU-x", 2)),
        ("nvidia2", "device-name", gpu("GPU-x", 2)),
    ],
)
async def test_index_and_device_name_forms(telemetry, client, clock, device_id, id_type, resource):
    client.set(pod("ml", "p", container("c", {GPU: [device_id]})))
    client.devices = None
    processor = make_processor(telemetry, client, clock, device_id_type=id_type)
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)
    assert holders_of(processor.process((resource,)), "GPU-x") == [("ml", "p", "c")]
    await processor.shutdown()


async def test_gke_and_legacy_mig_forms(telemetry, client, clock):
    client.set(
        pod("ml", "gke", container("c", {"nvidia.com/gpu": ["nvidia0/gi1"]})),
        pod("ml", "old", container("c", {"nvidia.com/gpu": [f"MIG-{UUID_B}/2/0"]})),
    )
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)
    batch = (gpu(UUID_A, 0), mig(MIG_1, UUID_A, 1), gpu(UUID_B, 1), mig(MIG_2, UUID_B, 2))
    out = processor.process(batch)
    assert holders_of(out, MIG_1) == [("ml", "gke", "c")]
    assert holders_of(out, MIG_2) == [("ml", "old", "c")]
    await processor.shutdown()


async def test_id_forms_are_logged_once_per_change(started, client, clock, caplog):
    caplog.set_level(logging.INFO, logger="otelgpu.processor.k8s_attributes")
    client.set(pod("ml", "a", container("c", {GPU: [UUID_A]})))
    for _ in range(3):
        await clock.advance(10)
    client.set(pod("ml", "a", container("c", {GPU: [f"{UUID_A}::0"]})))
    for _ in range(3):
        await clock.advance(10)
    lines = [r.getMessage() for r in caplog.records if "device IDs seen" in r.getMessage()]
    assert lines == [
        "pod-resources device IDs seen (device_id_type=auto): gpu-uuid=1",
        "pod-resources device IDs seen (device_id_type=auto): gpu-uuid=1, replica=1",
    ]


async def test_missing_socket_is_reported_once(telemetry, client, clock, caplog):
    caplog.set_level(logging.WARNING, logger="otelgpu.telemetry")
    client.error = PodResourcesError("SOCKET_MISSING", "no socket at /var/lib/kubelet/x")
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    await clock.advance(600)
    assert client.list_calls >= 10
    down = [r for r in caplog.records if "pod_resources is down" in r.getMessage()]
    assert len(down) == 1 and "no socket" in down[0].getMessage()
    await processor.shutdown()
    assert client.closed == 1


@pytest.mark.parametrize(
    ("config_name", "environ", "expected"),
    [
        ("", {"K8S_NODE_NAME": "from-env"}, "from-env"),
        ("from-config", {"K8S_NODE_NAME": "from-env"}, "from-config"),
        ("", {}, None),
    ],
)
async def test_node_name(telemetry, client, clock, config_name, environ, expected):
    processor = make_processor(telemetry, client, clock, environ=environ, node_name=config_name)
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)
    (rm,) = processor.process((gpu(UUID_B),))
    assert rm.resource.get(semconv.K8S_NODE_NAME) == expected
    await processor.shutdown()


async def test_otlp_request_carries_each_device_once(started, client, clock):
    """A device is never sent twice in one OTLP batch under two label sets."""
    from otelgpu.exporters.otlp.encode import encode

    client.set(
        *(pod("ml", f"infer-{i}", container("srv", {GPU: [f"{UUID_A}::{i}"]})) for i in (0, 1)),
        pod("ml", "a", container("c", {"nvidia.com/mig-1g.10gb": [MIG_1]})),
        pod("ml", "b", container("c", {"nvidia.com/mig-1g.10gb": [MIG_2]})),
    )
    await clock.advance(10)
    batch = (gpu(UUID_A, 0), gpu(UUID_B, 1), mig(MIG_1, UUID_B, 1), mig(MIG_2, UUID_B, 2))
    request = encode(started.process(batch))
    devices = []
    for rm in request.resource_metrics:
        attrs = {a.key: a.value.string_value for a in rm.resource.attributes}
        names = {m.name for sm in rm.scope_metrics for m in sm.metrics}
        if semconv.GPU_ALLOCATION not in names:
            devices.append(attrs[semconv.HW_ID])
    assert sorted(devices) == sorted([UUID_A, UUID_B, MIG_1, MIG_2])


async def test_why_one_gpu_is_unlabelled_is_on_its_own_series(started, telemetry, client, clock):
    """The unmatched counter names the device, so "why is this GPU unlabelled" is one query."""
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    started.process((gpu(UUID_A, 0), gpu(UUID_B, 1), gpu("GPU-unknown", 2)))
    assert series(telemetry, UNMATCHED, hw_id=UUID_A) is None
    assert series(telemetry, UNMATCHED, hw_id=UUID_B, reason="not_allocated") == 2
    assert series(telemetry, UNMATCHED, hw_id="GPU-unknown", reason="unknown_device") == 2


async def test_each_holder_notes_since_when_the_kubelet_lists_it(telemetry, client, clock):
    """What container_env needs to never lend a deleted pod's labels to a pod recreated under
    its name: since when this container holds this device (its first answer's: always)."""
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    try:
        first = processor.process((gpu(UUID_A, 0), gpu(UUID_B, 1)))
        assert [rm.notes[notes.HOLDER_SINCE] for rm in first if rm.notes] == [float("-inf")] * 2
        client.set(
            pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})),
            pod("ml", "train-0b", container("trainer", {GPU: [UUID_B]})),
        )
        await clock.advance(10)
        out = processor.process((gpu(UUID_A, 0), gpu(UUID_B, 1)))
    finally:
        await processor.shutdown()
    since = {
        (rm.identity, rm.resource[semconv.HW_ID]): rm.notes[notes.HOLDER_SINCE]
        for rm in out
        if rm.notes
    }
    assert since[(UUID_A, UUID_A)] == float("-inf")  # still the first answer's holder
    assert since[(UUID_B, UUID_B)] == clock.now  # listed by the answer just taken
    assert since[((semconv.GPU_ALLOCATION, UUID_B), UUID_B)] == clock.now
    confirmed = {rm.notes[notes.HOLDERS_CONFIRMED] for rm in out if rm.notes}
    assert confirmed == {clock.now}  # when the kubelet last answered


async def test_a_first_answer_after_failures_lists_its_holders_as_new(telemetry, client, clock):
    """Only the answer to the first request at start dates its holders "always": after
    failures, the first answer may list pods recreated since the runtime was listed."""
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    client.error = PodResourcesError("UNAVAILABLE", "kubelet restarting")
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    try:
        client.error = None
        await clock.advance(2)
        out = processor.process((gpu(UUID_A, 0),))
    finally:
        await processor.shutdown()
    assert holders_of(out, UUID_A) == [("ml", "train-0", "trainer")]
    (since,) = {rm.notes[notes.HOLDER_SINCE] for rm in out if rm.notes}
    assert 1000.0 < since <= clock.now  # when the retry answered, not "always" (-inf)


async def test_a_reload_claims_the_kubelet_source_again(telemetry, client, clock):
    """The service retires the sources no component of the new graph registered at its start:
    a processor started again after a reload must claim the kubelet source itself (its first
    answer finds the source known and would not), or the source's gauges and readiness entry
    vanish until the answer after."""
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    first = make_processor(telemetry, client, clock)
    await first.start(FakeHost(telemetry))
    await first.shutdown()
    telemetry.open_source_claims()  # the reload's new graph starts
    again = make_processor(telemetry, client, clock)
    await again.start(FakeHost(telemetry))
    answers = client.list_calls
    assert telemetry.retire_unclaimed_sources() == []
    assert series(telemetry, "otelgpu_source_up", source="pod_resources") == 1
    assert series(
        telemetry, "otelgpu_source_last_success_timestamp_seconds", source="pod_resources"
    )
    assert "pod_resources" in telemetry.sources and telemetry.sources_not_ready() == []
    assert client.list_calls == answers  # all of it before the next answer
    await again.shutdown()
