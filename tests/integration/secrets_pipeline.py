"""The pipeline the secrets tests run the agent with: one simulated GPU, k8s_attributes on the
test's pod-resources server, container_env on a private containerd with the given include
filters and no cap that could hide a leak, and every exporter a canary could leave by."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from tests.e2e.node import eventually
from tests.integration.agent_process import AgentProcess
from tests.peers import kubelet as kubelet_api
from tests.peers.cri_records import Pod, create_container, create_sandbox
from tests.peers.kubelet import FakeKubelet
from tests.peers.prometheus import free_port
from tests.peers.rotel import Rotel, rotel
from tests.peers.runtime import Containerd

Pipeline = Callable[[Containerd, FakeKubelet, Rotel, list[int]], dict[str, Any]]


def secrets_pipeline(
    *,
    gpu: str,
    containerd: Containerd,
    kubelet: FakeKubelet,
    otlp: Rotel,
    ports: list[int],
    node_name: str,
    filters: dict[str, Any],
    max_attributes: int,
    otlp_http: bool = False,
    debug_exporter: bool = False,
) -> dict[str, Any]:
    """Two Prometheus exporters (otel and dcgm naming) on `ports`, OTLP gRPC to `otlp` (and
    OTLP/HTTP too with `otlp_http`, the debug exporter writing every point to the log with
    `debug_exporter`), debug logs; `filters` are container_env's sections."""
    exporters: dict[str, Any] = {
        "prometheus": {"endpoint": f"127.0.0.1:{ports[0]}"},
        "prometheus/dcgm": {"endpoint": f"127.0.0.1:{ports[1]}", "naming": "dcgm"},
        "otlp": {"endpoint": otlp.grpc_endpoint, "tls": {"insecure": True}},
    }
    if otlp_http:
        exporters["otlp_http"] = {"endpoint": otlp.http_endpoint}
    if debug_exporter:
        exporters["debug"] = {"verbosity": "detailed"}
    return {
        "receivers": {
            "nvml": {
                "collection_interval": "500ms",
                "backend": "simulated",
                "simulated": {"gpus": [{"uuid": gpu}]},
            }
        },
        "processors": {
            "k8s_attributes": {
                "pod_resources_socket": str(kubelet.socket),
                "refresh_interval": "500ms",
                "node_name": node_name,
            },
            "container_env": {
                "runtime": "containerd",
                "containerd": {"socket": str(containerd.socket)},
                "refresh_interval": "500ms",
                **filters,
                # No cap hides a leak: everything not refused is exported.
                "max_attributes": max_attributes,
                "max_value_length": 4096,
            },
        },
        "exporters": exporters,
        "service": {
            "telemetry": {"logs": {"level": "debug"}},
            "pipelines": {
                "metrics/gpu": {
                    "receivers": ["nvml"],
                    "processors": ["k8s_attributes", "container_env"],
                    "exporters": list(exporters),
                }
            },
        },
    }


class SecretsRun:
    """The agent and its peers, and what left the agent: two /metrics bodies (otel and dcgm
    naming, on `ports`) and what rotel received."""

    def __init__(self, agent: AgentProcess, otlp: Rotel, ports: list[int], config: Path) -> None:
        self.agent, self.otlp, self.ports, self.config = agent, otlp, ports, config
        self.session = aiohttp.ClientSession()

    async def body(self, port: int) -> str:
        try:
            async with self.session.get(f"http://127.0.0.1:{port}/metrics") as response:
                return await response.text() if response.status == 200 else ""
        except aiohttp.ClientError:
            return ""

    async def outputs(self, ready: Callable[[str, str, str], bool]) -> dict[str, str]:
        """Every output, once `ready(otel body, dcgm body, rotel text)` holds: the pipeline
        works end to end, so a canary that is absent was refused, not late."""
        bodies: dict[str, str] = {}

        async def check() -> bool:
            for name, port in zip(("otel /metrics", "dcgm /metrics"), self.ports, strict=True):
                bodies[name] = await self.body(port)
            return ready(bodies["otel /metrics"], bodies["dcgm /metrics"], self.otlp.text())

        await eventually(check, lambda: f"enriched output; agent log:\n{self.agent.output[-3000:]}")
        return {**bodies, "rotel output": self.otlp.text()}


@contextlib.asynccontextmanager
async def secrets_run(
    root: Path,
    *,
    pod: Pod,
    gpu: str,
    env: dict[str, str],
    labels: dict[str, str],
    pipeline: Pipeline,
) -> AsyncIterator[SecretsRun]:
    """A private containerd holding `pod` with one container `main` (`env`, `labels`), a
    pod-resources server giving it `gpu`, rotel, and the agent running `pipeline(...)`."""
    containerd = Containerd(root / "containerd")
    containerd.start()
    kubelet = FakeKubelet()
    try:
        create_sandbox(containerd.socket, pod)
        create_container(containerd.socket, pod, "main", env=env, labels=labels)
        kubelet.set_pods(
            kubelet_api.pod(
                pod.namespace, pod.name, kubelet_api.container("main", {"nvidia.com/gpu": [gpu]})
            )
        )
        kubelet.set_allocatable({"nvidia.com/gpu": [gpu]})
        await kubelet.start()
        with rotel(root / "rotel") as otlp:
            ports = [free_port(), free_port()]
            config = root / "pipeline.yaml"
            settings = pipeline(containerd, kubelet, otlp, ports)
            config.write_text(yaml.safe_dump(settings, allow_unicode=True))
            agent = AgentProcess("run", "-c", str(config))
            run = SecretsRun(agent, otlp, ports, config)
            try:
                yield run
            finally:
                await run.session.close()
                try:
                    await asyncio.to_thread(agent.stop)
                finally:
                    agent.kill()
    finally:
        await kubelet.close()
        containerd.stop()
