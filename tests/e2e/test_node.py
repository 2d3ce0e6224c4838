"""End to end on one node: real containerd, dockerd, Prometheus and rotel; the real CLI.

One node is started for the module (tests/e2e/node.py); the tests read what leaves the agent
through Prometheus's query API, the agent's /metrics bodies and rotel's output, then break
its sources one at a time (R1 containerd killed, R3 kubelet slow, a reload, R5 pod deleted, a
pod recreated under the same name on another GPU) and check what users see. Meanwhile a
watcher (tests/e2e/identity.py) checks every body the agent serves for R10: one series per
device, allocation shares adding up, no borrowed labels. The fault tests restore what they
broke, so they run in file order; the R10 verdict and the secret check run last, over
everything the run produced.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.node import (
    ALLOCATED,
    CANARY,
    EXPIRATION,
    GPU0,
    GPU1,
    GPU2,
    GPU3,
    HOLDERS,
    INFER_B,
    MIG,
    NODE_NAME,
    NOTEBOOK_C,
    TRAIN_A,
    Holder,
    Node,
    eventually,
    kubelet_pods,
    plant,
    recreated,
    running_node,
)
from tests.peers import kubelet as kubelet_api
from tests.peers.cri_records import stop_pod
from tests.peers.prometheus import Result

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

# Whose labels each device's own series carry: one holder, or none (the MIG-enabled GPU is
# held through its instance; the time-sliced GPU2 by two pods, named on allocation series).
HELD_BY: dict[str, tuple[Holder, ...]] = {
    GPU0: (TRAIN_A,),
    GPU1: (),
    MIG: (INFER_B,),
    GPU2: (),
    GPU3: (),
}


@dataclass(frozen=True)
class Naming:
    """Where each fact lands in one naming mode of the prometheus exporter."""

    job: str
    gpu: str  # the series' own GPU or MIG UUID
    pod: str
    namespace: str
    container: str
    team: str
    project: str
    pod_team: str
    cost_center: str
    owner: str


OTEL = Naming(
    job="otel",
    gpu="hw_id",
    pod="k8s_pod_name",
    namespace="k8s_namespace_name",
    container="k8s_container_name",
    team="container_env_TEAM",
    project="container_env_PROJECT",
    pod_team="k8s_pod_label_team",
    cost_center="k8s_pod_annotation_example_com_cost_center",
    owner="container_label_com_example_owner",
)
DCGM = Naming(
    job="dcgm",
    gpu="UUID",
    pod="pod",
    namespace="namespace",
    container="container",
    team="env_TEAM",
    project="env_PROJECT",
    pod_team="team",  # dcgm-exporter renders pod labels under their own (sanitized) names
    cost_center="annotation_example_com_cost_center",
    owner="label_com_example_owner",
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def node(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Node]:
    async with running_node(tmp_path_factory.mktemp("e2e")) as started:
        yield started


def value(series: dict[str, Any]) -> float:
    return float(series["value"][1])


def gpu_of(metric: dict[str, str], naming: Naming) -> str:
    # dcgm naming names a MIG instance by its GPU's UUID and its GPU_I_ID (the node has one).
    return MIG if "GPU_I_ID" in metric else metric[naming.gpu]


def _holder_problems(m: dict[str, str], n: Naming, holders: tuple[Holder, ...]) -> list[str]:
    if not holders:
        return [f"idle GPU labelled: {m}"] if n.pod in m or n.team in m else []
    holder = next((h for h in holders if h.pod.name == m.get(n.pod)), None)
    if holder is None:
        return [f"not its holder: {m}"]
    expected = {
        n.namespace: holder.pod.namespace,
        n.container: holder.container,
        n.team: holder.team,
        n.project: holder.project,
        n.pod_team: holder.team,
        n.cost_center: f"cc-{holder.pod.name}",
    }
    if n is OTEL:  # dcgm naming's label set names the node by Hostname only
        expected["k8s_node_name"] = NODE_NAME
    return [f"{k}={m.get(k)!r}, wanted {v!r}: {m}" for k, v in expected.items() if m.get(k) != v]


ALLOCATION = "nvidia_gpu_allocation_ratio"
INFO = "hw_gpu_info"


def problems(result: Result, n: Naming, node: Node) -> list[str]:
    """Every GPU series that does not carry exactly its holder's labels; [] when all do."""
    found: list[str] = []
    seen = set()
    for series in result:
        m = series["metric"]
        if "process_pid" in m:  # the docker container's process on GPU3
            want = {"container_id": node.job.id, n.team: "batch", n.owner: "alice"}
            found += [f"process {k}={m.get(k)!r}" for k, v in want.items() if m.get(k) != v]
            continue
        if m["__name__"] == INFO:  # a device's static facts: never a holder's labels
            found += [f"info series with holder labels: {m}"] * (n.pod in m or n.team in m)
            continue
        if m["__name__"] == ALLOCATION:
            found += _holder_problems(m, n, ALLOCATED[gpu_of(m, n)])
        else:
            found += _holder_problems(m, n, HELD_BY[gpu_of(m, n)])
        seen.add(m.get(n.pod))
    missing = {h.pod.name for h in HOLDERS} - seen
    return found + [f"no series for {sorted(missing)}"] * bool(missing)


@pytest.mark.parametrize("naming", [OTEL, DCGM], ids=["otel", "dcgm"])
async def test_every_gpu_series_names_its_holder_and_business_labels(
    node: Node, naming: Naming
) -> None:
    # The agent's own counters may name a device (hw_id) too; they describe the agent, not a holder.
    expr = f'{{job="{naming.job}",{naming.gpu}!="",__name__!~"otelgpu_.*"}}'
    last: list[str] = []

    async def all_right() -> int:
        nonlocal last
        result = await node.prom.query(expr)
        last = problems(result, naming, node)
        # 4 GPUs, 1 MIG instance, 1 process: about a hundred series and more (dcgm naming
        # serves GPU1 as its MIG instance only, dcgm-exporter's device set: fewer)
        if len(result) < (100 if naming is OTEL else 80):
            last.append(f"only {len(result)} series")
        return 0 if last else len(result)

    await eventually(all_right, lambda: f"{expr}: {len(last)} wrong, e.g. {last[:3]}")
    # Spot checks of the exact labels users query by, in this naming mode.
    util = (
        'hw_gpu_utilization_ratio{hw_gpu_task="general",'
        if naming is OTEL
        else "DCGM_FI_DEV_GPU_UTIL{"
    )
    (shared,) = await node.prom.query(f'{util}job="{naming.job}",{naming.gpu}="{GPU2}"}}')
    assert naming.pod not in shared["metric"]  # one series, no single holder's labels
    assert shared["metric"]["nvidia_gpu_holders"] == "2"
    holders = await node.prom.query(f'{ALLOCATION}{{job="{naming.job}",{naming.gpu}="{GPU2}"}}')
    replica = "nvidia_gpu_replica" if naming is OTEL else "vgpu"
    assert sorted((s["metric"][naming.pod], s["metric"][replica]) for s in holders) == [
        ("notebook-c", "0"),
        ("notebook-d", "1"),
    ]
    assert [value(s) for s in holders] == [0.5, 0.5]
    # dcgm naming: the MIG instance's series carry its GPU's UUID too, told apart by GPU_I_ID
    parent = await node.prom.query(f'{util}job="{naming.job}",{naming.gpu}="{GPU1}",GPU_I_ID=""}}')
    if naming is DCGM:  # dcgm-exporter's device set: the MIG GPU is served as its instance
        assert parent == []
    else:
        assert parent and all(naming.pod not in s["metric"] for s in parent)
    memory = "hw_gpu_memory_usage_bytes" if naming is OTEL else "DCGM_FI_DEV_FB_USED"
    instance = f'hw_id="{MIG}"' if naming is OTEL else f'UUID="{GPU1}",GPU_I_ID!=""'
    mig = await node.prom.query(f'{memory}{{job="{naming.job}",{instance}}}')
    assert [s["metric"][naming.pod] for s in mig] == ["infer-b"]
    if naming is DCGM:
        assert mig[0]["metric"]["UUID"] == GPU1 and mig[0]["metric"]["GPU_I_PROFILE"] == "1g.10gb"


async def test_a_gpu_process_maps_to_its_real_docker_container(node: Node) -> None:
    expr = f'nvidia_gpu_process_memory_usage_bytes{{process_pid="{node.job.pid}"}}'
    teams = ("container_env_TEAM", "env_TEAM")  # the first batches may be unlabelled
    result = await node.prom.wait_for(
        expr, lambda r: len(r) == 2 and all(set(teams) & s["metric"].keys() for s in r)
    )
    by_job = {s["metric"]["job"]: s for s in result}
    otel, dcgm = by_job["otel"]["metric"], by_job["dcgm"]["metric"]
    assert otel["container_id"] == dcgm["container_id"] == node.job.id
    assert otel["hw_id"] == dcgm["UUID"] == GPU3
    assert (otel["container_env_TEAM"], otel["container_env_PROJECT"]) == ("batch", "nightly")
    assert (dcgm["env_TEAM"], dcgm["env_PROJECT"]) == ("batch", "nightly")
    assert otel["container_label_com_example_owner"] == dcgm["label_com_example_owner"] == "alice"
    assert "k8s_pod_name" not in otel  # a plain docker container names no pod
    assert value(by_job["otel"]) == 6 * 2**30
    # Its own utilization, per task; and it runs on a GPU nobody was allocated: a squatter.
    tasks = await node.prom.wait_for(
        f'nvidia_gpu_process_utilization_ratio{{job="otel",process_pid="{node.job.pid}"}}',
        lambda r: len(r) == 3,
    )
    assert {s["metric"]["hw_gpu_task"] for s in tasks} == {"general", "encoder", "decoder"}
    outside = 'otelgpu_gpu_processes_outside_allocation{job="otel"}'
    await node.prom.wait_for(outside, lambda r: len(r) == 1 and value(r[0]) == 1)
    assert f"process {node.job.pid} of {node.job.id} uses GPU {GPU3}" in node.log


async def test_otlp_resources_reach_rotel_with_the_same_labels(node: Node) -> None:
    def labelled(resources: list[Any]) -> bool:
        attrs = [r.attributes for r in resources]
        gpu0 = any(
            a.get("hw.id") == GPU0 and a.get("container.env.TEAM") == "vision" for a in attrs
        )
        job = any(
            a.get("container.id") == node.job.id and a.get("container.env.TEAM") == "batch"
            for a in attrs
        )
        return gpu0 and job

    resources = await node.rotel.wait_for(labelled, timeout=20)
    gpu0 = next(
        r
        for r in resources
        if r.attributes.get("hw.id") == GPU0 and "container.env.TEAM" in r.attributes
    )
    assert gpu0.attributes["k8s.pod.name"] == "train-a"
    assert gpu0.attributes["k8s.namespace.name"] == "research"
    assert gpu0.attributes["k8s.container.name"] == "trainer"
    assert gpu0.attributes["k8s.pod.label.app.kubernetes.io/name"] == "train"
    assert "k8s.pod.label.tier" not in gpu0.attributes  # not in the include list
    assert {m.name for m in gpu0.metrics} >= {"hw.gpu.utilization", "hw.power", "hw.energy"}


async def _gpu0(node: Node, metric: str = "hw_energy_joules_total") -> list[Any]:
    return await node.samples(node.otel_port, metric, hw_id=GPU0)


async def test_r1_containerd_killed_then_back(node: Node) -> None:
    """A runtime outage never changes labels: the last good snapshot keeps labelling (the
    labelled series must not freeze while a new pod-only series carries the values)."""
    source = 'otelgpu_source_up{job="otel",source="containerd"}'
    assert node.watch is not None
    node.watch.phase = "containerd down"
    await asyncio.to_thread(node.containerd.kill)
    try:
        await node.prom.wait_for(source, lambda r: len(r) == 1 and value(r[0]) == 0)
        age = 'otelgpu_container_env_snapshot_age_seconds{job="otel",runtime="containerd"}'
        await node.prom.wait_for(age, lambda r: len(r) == 1 and value(r[0]) > 0)
        first = await _gpu0(node)
        assert [x.labels.get("container_env_TEAM") for x in first] == ["vision"], first

        async def still_updating() -> bool:
            now = await _gpu0(node)
            labelled = [x.labels.get("container_env_TEAM") for x in now] == ["vision"]
            return labelled and now[0].value > first[0].value

        await eventually(still_updating, "GPU0 energy rising, labelled, while containerd is down")
    finally:
        await asyncio.to_thread(node.containerd.start)
        node.watch.phase = "containerd back"
    await node.prom.wait_for(source, lambda r: len(r) == 1 and value(r[0]) == 1)

    async def labelled_only() -> bool:
        return [x.labels.get("container_env_TEAM") for x in await _gpu0(node)] == ["vision"]

    await eventually(labelled_only, "GPU0 labelled, once, after restart")


async def test_r3_slow_kubelet_keeps_the_last_good_mapping(node: Node) -> None:
    source = 'otelgpu_source_up{job="otel",source="pod_resources"}'
    age = 'otelgpu_pod_resources_snapshot_age_seconds{job="otel"}'
    assert node.watch is not None
    node.watch.phase = "kubelet slow"
    node.kubelet.delay = 3.0  # beyond the processor's 1s timeout
    try:
        await node.prom.wait_for(source, lambda r: len(r) == 1 and value(r[0]) == 0)
        # Older than metric_expiration: series still on /metrics are fresh, not leftovers.
        await node.prom.wait_for(age, lambda r: len(r) == 1 and value(r[0]) > EXPIRATION + 1)
        served = await node.samples(
            node.otel_port, "hw_gpu_utilization_ratio", hw_id=GPU0, hw_gpu_task="general"
        )
        assert [x.labels.get("k8s_pod_name") for x in served] == ["train-a"], served
        assert served[0].labels["container_env_TEAM"] == "vision"  # env joins on the old pod
        errors = await node.samples(node.otel_port, "otelgpu_pod_resources_errors_total")
        assert any(e.labels["code"] == "DEADLINE_EXCEEDED" and e.value > 0 for e in errors), errors
        assert await node.samples(node.dcgm_port, "DCGM_FI_DEV_GPU_UTIL", pod="train-a")
    finally:
        node.kubelet.delay = 0.0
    await node.prom.wait_for(source, lambda r: len(r) == 1 and value(r[0]) == 1, timeout=30)
    await node.prom.wait_for(age, lambda r: len(r) == 1 and value(r[0]) < EXPIRATION)


async def test_reload_serves_no_unlabelled_series(node: Node) -> None:
    """After a reload the first collection goes out labelled, like every other."""
    assert node.watch is not None and node.agent is not None
    node.watch.phase = "reload"
    mark = len(node.agent.lines)
    node.agent.send(signal.SIGHUP)
    await asyncio.to_thread(node.agent.wait_for, "configuration reloaded", after=mark)

    async def labelled() -> bool:
        return [x.labels.get("container_env_TEAM") for x in await _gpu0(node)] == ["vision"]

    await eventually(labelled, "GPU0 labelled after the reload")
    await asyncio.sleep(2.0)  # several collections of the new pipelines, all watched
    node.watch.phase = "after reload"


async def test_r5_deleted_pod_leaves_and_is_never_relabelled(node: Node) -> None:
    assert node.watch is not None
    node.watch.phase = "pod deleted"
    # GPU2 keeps one holder: its own series now carry notebook-c's labels.
    node.watch.allow(GPU2, NOTEBOOK_C.pod.name, NOTEBOOK_C.team)
    node.kubelet.set_pods(*kubelet_pods(TRAIN_A, INFER_B, NOTEBOOK_C))

    async def only_c(port: int, pod: str, metric: str) -> bool:
        samples = await node.samples(port, metric)
        on_gpu2 = [s for s in samples if GPU2 in (s.labels.get("hw_id"), s.labels.get("UUID"))]
        return bool(on_gpu2) and {s.labels.get(pod) for s in on_gpu2} == {"notebook-c"}

    await eventually(
        lambda: only_c(node.otel_port, "k8s_pod_name", "hw_power_watts"), "otel: D gone"
    )
    await eventually(
        lambda: only_c(node.dcgm_port, "pod", "DCGM_FI_DEV_POWER_USAGE"), "dcgm: D gone"
    )
    for expr in ('{job="otel",k8s_pod_name="notebook-d"}', '{job="dcgm",pod="notebook-d"}'):
        await node.prom.wait_for(expr, lambda r: r == [])  # stale in Prometheus too
    # Over the whole run, no GPU2 series ever paired a pod with the other pod's labels.
    ever = await node.prom.query(
        f"count by (job, k8s_pod_name, container_env_TEAM, pod, env_TEAM) "
        f'(last_over_time({{hw_id="{GPU2}"}}[10m]) or last_over_time({{UUID="{GPU2}"}}[10m]))'
    )
    pairs = {
        (m.get("k8s_pod_name") or m.get("pod"), m.get("container_env_TEAM") or m.get("env_TEAM"))
        for m in (s["metric"] for s in ever)
    }
    labelled = {(pod, team) for pod, team in pairs if pod and team}
    assert labelled == {("notebook-c", "nlp"), ("notebook-d", "speech")}, pairs
    await watched(node)


async def test_a_pod_recreated_under_its_name_never_borrows_the_old_ones_labels(
    node: Node,
) -> None:
    """`research/train-a` is deleted and created again on another GPU. The kubelet names the
    new pod before its containers exist, while the old pod's stopped records are still in
    containerd: matched by name alone, the new GPU would carry the old pod's env and pod
    labels."""
    assert node.watch is not None
    node.watch.phase = "pod recreated"
    again = recreated(TRAIN_A, device=GPU3, team="robotics", project="arm")
    node.watch.allow(GPU3, again.pod.name, again.team)
    node.watch.allow(GPU0, None, None)  # idle once the old pod is gone
    await asyncio.to_thread(stop_pod, node.containerd.socket, TRAIN_A.pod, TRAIN_A.container)
    node.kubelet.set_pods(*kubelet_pods(again, INFER_B, NOTEBOOK_C))

    async def on_gpu3() -> list[Any]:
        return await node.samples(node.otel_port, "hw_power_watts", hw_id=GPU3)

    async def named() -> bool:
        return [s.labels.get("k8s_pod_name") for s in await on_gpu3()] == ["train-a"]

    await eventually(named, "GPU3 named train-a")
    # The old train-a no longer holds GPU0: its allocation series left with the collection that
    # named GPU3 (not `metric_expiration` later), in both namings: in the first body of each
    # that names GPU3's new holder, GPU0 is billed to nobody.
    for port, gpu, pod in (
        (node.otel_port, "hw_id", "k8s_pod_name"),
        (node.dcgm_port, "UUID", "pod"),
    ):

        async def moved(
            port: int = port, gpu: str = gpu, pod: str = pod
        ) -> tuple[list[str]] | None:
            body = await node.body(port)
            held = [s for f in text_string_to_metric_families(body) for s in f.samples]
            if not any(s.labels.get(gpu) == GPU3 and s.labels.get(pod) == "train-a" for s in held):
                return None
            return (
                [
                    str(s.labels)
                    for s in held
                    if s.name == "nvidia_gpu_allocation_ratio" and s.labels.get(gpu) == GPU0
                ],
            )

        (billed,) = await eventually(moved, f"GPU3 named train-a on port {port}")
        assert billed == [], billed
    await asyncio.sleep(2.0)  # several refreshes while only the old, stopped records exist
    assert [s.labels.get("container_env_TEAM") for s in await on_gpu3()] == [None]
    await asyncio.to_thread(plant, node.containerd, again)

    async def labelled() -> bool:
        return [s.labels.get("container_env_TEAM") for s in await on_gpu3()] == ["robotics"]

    await eventually(labelled, "GPU3 labelled with the new pod's env")
    node.watch.phase = "after recreate"


async def test_a_container_holding_two_gpus_is_labelled_on_both(node: Node) -> None:
    """The recreated train-a's container is given GPU0 beside GPU3: one holder of two devices,
    labelled on both (it was taken for a pod moving between them and never labelled)."""
    assert node.watch is not None
    node.watch.phase = "two gpus"
    node.watch.allow(GPU0, "train-a", "robotics")
    both = kubelet_api.pod(
        "research", "train-a", kubelet_api.container("trainer", {"nvidia.com/gpu": [GPU3, GPU0]})
    )
    node.kubelet.set_pods(both, *kubelet_pods(INFER_B, NOTEBOOK_C))

    async def labelled(naming: Naming, port: int, gpu: str) -> bool:
        power = "hw_power_watts" if naming is OTEL else "DCGM_FI_DEV_POWER_USAGE"
        samples = await node.samples(port, power, **{naming.gpu: gpu})
        return [s.labels.get(naming.team) for s in samples] == ["robotics"]

    for naming, port in ((OTEL, node.otel_port), (DCGM, node.dcgm_port)):
        for gpu in (GPU0, GPU3):
            await eventually(
                lambda n=naming, p=port, g=gpu: labelled(n, p, g), f"{gpu} labelled ({naming.job})"
            )
    await watched(node)


async def watched(node: Node, scrapes: int = 4) -> None:
    """Returns once the watcher has judged `scrapes` bodies of the current phase (a phase whose
    checks pass quickly must still be watched before the next one starts)."""
    watch = node.watch
    assert watch is not None
    phase = watch.phase

    async def enough() -> bool:
        return watch.scrapes[phase] >= scrapes

    await eventually(enough, lambda: f"{scrapes} watched bodies in phase {phase!r}")


async def test_r10_every_body_had_one_series_per_device_and_true_labels(node: Node) -> None:
    """The verdict of the watcher that checked every body since the agent was launched."""
    assert node.watch is not None
    await asyncio.sleep(1.0)  # a last few bodies after the final change
    scrapes = dict(node.watch.scrapes)
    assert node.watch.violations == [], (scrapes, node.watch.violations[:20])
    phases = (
        "start",
        "containerd down",
        "kubelet slow",
        "reload",
        "pod deleted",
        "pod recreated",
        "two gpus",
    )
    for phase in phases:
        assert scrapes.get(phase, 0) >= 4, scrapes  # each phase was really watched


async def test_the_secret_canary_appears_nowhere(node: Node) -> None:
    refused = await node.prom.query('otelgpu_container_env_refused_keys_total{job="otel"}')
    assert sum(value(s) for s in refused) > 0  # the canary's keys were included, then refused
    for key in ("'API_TOKEN'", "'example.com/api-key'", "'com.example.secret-key'"):
        assert f"key {key}: it looks like a secret" in node.log  # the key name is logged...
    places = {
        "otel /metrics": await node.body(node.otel_port),
        "dcgm /metrics": await node.body(node.dcgm_port),
        "prometheus series": await node.all_series_ever(),
        "prometheus query": json.dumps(await node.prom.query('{__name__=~".+"}')),
        "rotel output": node.rotel.text(),
        "agent log": node.log,
    }
    assert len(places["prometheus series"]) > 10_000 and len(places["rotel output"]) > 10_000
    leaked = [where for where, text in places.items() if CANARY in text]
    assert not leaked, f"{CANARY} leaked into {leaked}"  # ...its value never


async def test_sigterm_stops_the_agent_cleanly(node: Node) -> None:
    assert node.agent is not None
    assert await asyncio.to_thread(node.agent.stop) == 0
    assert "Traceback" not in node.log, node.log[-4000:]
