"""One GPU node built on this machine for the end-to-end test.

Real peers (PEERS.md): a private containerd holding CRI records of four GPU pods, a private
dockerd on that containerd running one plain container that "uses" a GPU, a real Prometheus
scraping both of the agent's endpoints, and rotel receiving its OTLP. The kubelet is the
protocol-faithful `FakeKubelet`; the GPUs are the nvml receiver's simulated backend, told
that the docker container's real host pid is a GPU process. The agent is the real CLI in a
child process. A missing binary raises (the peers' launchers do): never a skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from otelgpu.receivers.nvml.processes import PROCESS_METRICS
from tests.e2e.identity import SeriesWatch
from tests.integration.agent_process import AgentProcess
from tests.peers import kubelet as kubelet_api
from tests.peers.cri_records import Pod, create_container, create_sandbox
from tests.peers.kubelet import FakeKubelet
from tests.peers.prometheus import PrometheusServer, Scrape, free_port
from tests.peers.rotel import Rotel, rotel
from tests.peers.runtime import Containerd, Dockerd, RunningContainer

T = TypeVar("T")

# Planted in env, a pod annotation and a docker label under secret-like keys that the include
# lists DO match: container_env must refuse them, so this value must never leave the agent.
CANARY = "canary-5e1f0c7a-do-not-export"
NODE_NAME = "e2e-node"
GPU0 = "GPU-e2e00000-0000-4000-8000-000000000000"  # whole GPU, one pod
GPU1 = "GPU-e2e00000-0000-4000-8000-000000000001"  # MIG-enabled
MIG = "MIG-e2e10000-0000-4000-8000-000000000001"  # its instance, one pod
GPU2 = "GPU-e2e00000-0000-4000-8000-000000000002"  # time-sliced between two pods
GPU3 = "GPU-e2e00000-0000-4000-8000-000000000003"  # not allocated; a docker process on it
EXPIRATION = 4.0  # the exporters' metric_expiration, seconds


@dataclass(frozen=True)
class Holder:
    """A pod's container holding one GPU device, and the business labels it carries."""

    pod: Pod
    container: str
    resource: str
    device: str
    team: str
    project: str

    @property
    def env(self) -> dict[str, str]:
        return {"TEAM": self.team, "PROJECT": self.project, "API_TOKEN": CANARY, "HOME": "/"}


def _holder(
    namespace: str, name: str, container: str, device: str, team: str, project: str
) -> Holder:
    pod = Pod(
        namespace,
        name,
        uid=f"uid-{name}",
        labels={"team": team, "app.kubernetes.io/name": name.split("-")[0], "tier": "gold"},
        annotations={"example.com/cost-center": f"cc-{name}", "example.com/api-key": CANARY},
    )
    resource = "nvidia.com/mig-1g.10gb" if device.startswith("MIG-") else "nvidia.com/gpu"
    return Holder(pod, container, resource, device, team, project)


TRAIN_A = _holder("research", "train-a", "trainer", GPU0, "vision", "detector")
INFER_B = _holder("serving", "infer-b", "server", MIG, "platform", "chat")
NOTEBOOK_C = _holder("research", "notebook-c", "lab", f"{GPU2}::0", "nlp", "tagger")
NOTEBOOK_D = _holder("research", "notebook-d", "lab", f"{GPU2}::1", "speech", "asr")
HOLDERS = (TRAIN_A, INFER_B, NOTEBOOK_C, NOTEBOOK_D)

# Who the kubelet allocated each device to at start. The device series of GPU0 and of the MIG
# instance carry their one holder's labels; GPU2's two holders are only on allocation series.
ALLOCATED: dict[str, tuple[Holder, ...]] = {
    GPU0: (TRAIN_A,),
    MIG: (INFER_B,),
    GPU2: (NOTEBOOK_C, NOTEBOOK_D),
}
# Devices whose own series carry no holder: the MIG-enabled GPU (held through its instance),
# the time-sliced GPU (two holders) and the idle GPU.
UNLABELLED = (GPU1, GPU2, GPU3)

JOB_ENV = {"TEAM": "batch", "PROJECT": "nightly", "API_TOKEN": CANARY}
JOB_LABELS = {"com.example.owner": "alice", "com.example.secret-key": CANARY}


def kubelet_pods(*holders: Holder) -> list[Any]:
    """The pod-resources `List` answer for these holders."""
    return [
        kubelet_api.pod(
            h.pod.namespace,
            h.pod.name,
            kubelet_api.container(h.container, {h.resource: [h.device]}),
        )
        for h in holders
    ]


def pipeline(
    kubelet: FakeKubelet,
    containerd: Containerd,
    dockerd: Dockerd,
    otlp: Rotel,
    ports: tuple[int, int],
    job_pid: int,
) -> dict[str, Any]:
    """The agent's pipeline file: nvml → k8s_attributes → container_env → two prometheus, otlp."""
    gpus = [
        {"uuid": GPU0},
        {"uuid": GPU1, "mig": [{"uuid": MIG, "profile": "1g.10gb"}]},
        {"uuid": GPU2},
        {"uuid": GPU3, "processes": [{"pid": job_pid, "used_memory": "6GiB"}]},
    ]
    exporter = {"metric_expiration": f"{EXPIRATION:g}s"}
    return {
        "receivers": {
            "nvml": {
                "collection_interval": "500ms",
                "processes": True,
                "metrics": {name: {"enabled": True} for name in PROCESS_METRICS},  # opt-in
                "backend": "simulated",
                "simulated": {"gpus": gpus},
            }
        },
        "processors": {
            "k8s_attributes": {
                "pod_resources_socket": str(kubelet.socket),
                "refresh_interval": "500ms",
                "timeout": "1s",
                "node_name": NODE_NAME,
            },
            "container_env": {
                "runtime": "auto",
                "containerd": {"socket": str(containerd.socket)},
                "docker": {"socket": str(dockerd.socket)},
                "refresh_interval": "500ms",
                "timeout": "2s",
                "env": {"include": ["TEAM", "PROJECT", "API_*"]},
                "labels": {"include": ["com.example.*"]},
                "pod_labels": {"include": ["team", "app.kubernetes.io/name"]},
                "annotations": {"include": ["example.com/*"]},
            },
        },
        "exporters": {
            "prometheus": {"endpoint": f"127.0.0.1:{ports[0]}", **exporter},
            "prometheus/dcgm": {"endpoint": f"127.0.0.1:{ports[1]}", "naming": "dcgm", **exporter},
            "otlp": {
                "endpoint": otlp.grpc_endpoint,
                "tls": {"insecure": True},
                "sending_queue": {"drain_timeout": "2s"},
            },
        },
        "service": {
            "telemetry": {"logs": {"level": "info"}},
            "pipelines": {
                "metrics/gpu": {
                    "receivers": ["nvml"],
                    "processors": ["k8s_attributes", "container_env"],
                    "exporters": ["prometheus", "prometheus/dcgm", "otlp"],
                }
            },
        },
    }


@dataclass(frozen=True)
class Sample:
    """One series line of a /metrics body."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Node:
    """Every running peer of the node, and ways to look at the agent's output."""

    containerd: Containerd
    dockerd: Dockerd
    kubelet: FakeKubelet
    rotel: Rotel
    job: RunningContainer
    otel_port: int
    dcgm_port: int
    agent: AgentProcess | None = None
    prometheus: PrometheusServer | None = None
    watch: SeriesWatch | None = None
    session: aiohttp.ClientSession = field(default_factory=aiohttp.ClientSession)

    @property
    def prom(self) -> PrometheusServer:
        assert self.prometheus is not None
        return self.prometheus

    @property
    def log(self) -> str:
        return self.agent.output if self.agent is not None else ""

    async def body(self, port: int) -> str:
        """A /metrics body (answered, 200), as Prometheus would fetch it."""
        async with self.session.get(f"http://127.0.0.1:{port}/metrics") as response:
            assert response.status == 200, response.status
            return await response.text()

    async def samples(self, port: int, name: str, **labels: str) -> list[Sample]:
        """The series called `name` with these label values in a fresh /metrics body."""
        found = []
        for family in text_string_to_metric_families(await self.body(port)):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k, "") == v for k, v in labels.items()):
                    found.append(Sample(s.name, dict(s.labels), float(s.value)))
        return found

    async def all_series_ever(self) -> str:
        """Prometheus's `/api/v1/series` answer for every series it ever stored, as text."""
        params = {"match[]": '{__name__=~".+"}', "start": "0"}
        async with self.session.get(f"{self.prom.url}/api/v1/series", params=params) as r:
            assert r.status == 200, await r.text()
            return await r.text()


async def eventually(
    check: Callable[[], Awaitable[T]], what: str | Callable[[], str], timeout: float = 20.0
) -> T:
    """Polls `check` until it returns something truthy; fails naming `what` (a text, or a
    function giving one, for a message about the last attempt) otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            text = what if isinstance(what, str) else what()
            raise AssertionError(f"never happened within {timeout}s: {text}; last={result!r}")
        await asyncio.sleep(0.2)


def plant(containerd: Containerd, holder: Holder) -> None:
    """The holder's pod as the CRI plugin runs it: a ready sandbox and a running container."""
    create_sandbox(containerd.socket, holder.pod)
    create_container(containerd.socket, holder.pod, holder.container, env=holder.env)


def recreated(holder: Holder, *, device: str, team: str, project: str) -> Holder:
    """The same namespace/pod/container names as `holder`, as a new pod (a new UID) on
    `device` with other business labels: a StatefulSet pod deleted and scheduled again."""
    old = holder.pod
    pod = Pod(
        old.namespace,
        old.name,
        uid=f"{old.uid}-again",
        labels={**old.labels, "team": team},
        annotations=old.annotations,
    )
    return Holder(pod, holder.container, holder.resource, device, team, project)


def _plant_pods(containerd: Containerd) -> None:
    for h in HOLDERS:
        plant(containerd, h)


async def _serving(node: Node, port: int) -> None:
    async def answers() -> bool:
        try:
            async with node.session.get(f"http://127.0.0.1:{port}/metrics") as response:
                return response.status == 200
        except aiohttp.ClientError:
            return False

    await eventually(answers, lambda: f"agent serving :{port}; its log:\n{node.log[-3000:]}")


@contextlib.asynccontextmanager
async def running_node(root: Path) -> AsyncIterator[Node]:
    """Starts every peer, then the agent, then Prometheus; stops all of them on exit."""
    async with contextlib.AsyncExitStack() as stack:
        containerd = Containerd(root / "containerd")
        stack.callback(containerd.stop)
        containerd.start()
        dockerd = Dockerd(root / "docker", containerd)
        stack.callback(dockerd.stop)  # removes its containers first
        dockerd.start()
        job = dockerd.run_container("e2e-batch-job", env=JOB_ENV, labels=JOB_LABELS)
        _plant_pods(containerd)
        kubelet = FakeKubelet()
        stack.push_async_callback(kubelet.close)
        kubelet.set_pods(*kubelet_pods(*HOLDERS))
        kubelet.set_allocatable(
            {"nvidia.com/gpu": [GPU0, f"{GPU2}::0", f"{GPU2}::1", GPU3], INFER_B.resource: [MIG]}
        )
        await kubelet.start()
        otlp = stack.enter_context(rotel(root / "rotel"))
        node = Node(containerd, dockerd, kubelet, otlp, job, free_port(), free_port())
        stack.push_async_callback(node.session.close)
        config = root / "pipeline.yaml"
        ports = (node.otel_port, node.dcgm_port)
        config.write_text(
            yaml.safe_dump(pipeline(kubelet, containerd, dockerd, otlp, ports, job.pid))
        )
        node.agent = AgentProcess("run", "-c", str(config))
        stack.push_async_callback(_stop_agent, node.agent)
        # From the agent's first body on, every body is checked (R10).
        node.watch = SeriesWatch(
            {"otel": node.otel_port, "dcgm": node.dcgm_port}, instances={(GPU1, "1"): MIG}
        )
        for device, holders in ALLOCATED.items():
            for h in holders:
                node.watch.allow(device, h.pod.name, h.team)
        for device in UNLABELLED:
            node.watch.allow(device, None, None)
        node.watch.start()
        stack.push_async_callback(node.watch.stop)
        for port in ports:
            await _serving(node, port)
        node.prometheus = PrometheusServer(
            root / "prometheus",
            Scrape(f"127.0.0.1:{node.otel_port}", job="otel"),
            Scrape(f"127.0.0.1:{node.dcgm_port}", job="dcgm"),
        )
        stack.push_async_callback(node.prometheus.stop)
        await node.prometheus.start()
        yield node


async def _stop_agent(agent: AgentProcess) -> None:
    try:
        await asyncio.to_thread(agent.stop)
    finally:
        agent.kill()
