"""The planted-secret corpus end to end: no canary leaves the agent, whatever is included.

Real peers (PEERS.md): a private containerd holding one GPU pod whose env, container labels,
pod labels and annotations each carry every entry of `tests/data/secret_corpus.yaml`; the
real CLI as a child process (nvml simulated, k8s_attributes on the test's pod-resources
server), logging at debug; two Prometheus exporters (otel and dcgm naming) and the OTLP gRPC
and HTTP exporters sending to a real rotel. Once the business keys arrive everywhere, no
canary may appear in either `/metrics` body, in rotel's output or in the agent's log; run
with `include: ["*"]` on every source, and with every planted key named exactly (but the
values only the plain-value rule for glob-matched keys can refuse).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from tests.e2e.node import eventually
from tests.integration.agent_process import AgentProcess
from tests.integration.secrets_pipeline import secrets_pipeline
from tests.peers import kubelet as kubelet_api
from tests.peers.cri_records import Pod, create_container, create_sandbox
from tests.peers.kubelet import FakeKubelet
from tests.peers.prometheus import free_port
from tests.peers.rotel import Rotel, rotel
from tests.peers.runtime import Containerd
from tests.unit.processors.container_env.corpus import SOURCES, Planted, load

pytestmark = pytest.mark.integration

TAG = "36c0ffee"  # fixed: the same canaries every run

GPU = "GPU-5150000-0000-4000-8000-000000000036"
MODES = ["include everything", "every key named"]


def _config(
    mode: str,
    planted: Planted,
    containerd: Containerd,
    kubelet: FakeKubelet,
    otlp: Rotel,
    ports: list[int],
) -> dict[str, Any]:
    filters = {
        source: {"include": ["*"] if mode == MODES[0] else planted.sources[source].named()}
        for source in SOURCES
    }
    return secrets_pipeline(
        gpu=GPU,
        containerd=containerd,
        kubelet=kubelet,
        otlp=otlp,
        ports=ports,
        node_name="corpus-node",
        filters=filters,
        max_attributes=1024,
        otlp_http=True,
    )


class Run:
    """The agent and its peers, and what left the agent."""

    def __init__(self, mode: str, agent: AgentProcess, otlp: Rotel, ports: list[int]) -> None:
        self.mode, self.agent, self.otlp, self.ports = mode, agent, otlp, ports
        self.session = aiohttp.ClientSession()

    async def body(self, port: int) -> str:
        try:
            async with self.session.get(f"http://127.0.0.1:{port}/metrics") as response:
                return await response.text() if response.status == 200 else ""
        except aiohttp.ClientError:
            return ""


@pytest.fixture(params=MODES)
async def run(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Run, Planted]]:
    planted = load(TAG)
    containerd = Containerd(tmp_path / "containerd")
    containerd.start()
    kubelet = FakeKubelet()
    try:
        pod = Pod(
            "ml",
            "corpus-pod",
            uid="uid-corpus",
            labels=planted.sources["pod_labels"].values,
            annotations=planted.sources["annotations"].values,
        )
        create_sandbox(containerd.socket, pod)
        create_container(
            containerd.socket,
            pod,
            "main",
            env=planted.sources["env"].values,
            labels=planted.sources["labels"].values,
        )
        kubelet.set_pods(
            kubelet_api.pod(
                "ml", "corpus-pod", kubelet_api.container("main", {"nvidia.com/gpu": [GPU]})
            )
        )
        kubelet.set_allocatable({"nvidia.com/gpu": [GPU]})
        await kubelet.start()
        with rotel(tmp_path / "rotel") as otlp:
            ports = [free_port(), free_port()]
            config = tmp_path / "pipeline.yaml"
            settings = _config(request.param, planted, containerd, kubelet, otlp, ports)
            config.write_text(yaml.safe_dump(settings, allow_unicode=True))
            agent = AgentProcess("run", "-c", str(config))
            result = Run(request.param, agent, otlp, ports)
            try:
                yield result, planted
            finally:
                await result.session.close()
                try:
                    await asyncio.to_thread(agent.stop)
                finally:
                    agent.kill()
    finally:
        await kubelet.close()
        containerd.stop()


async def _enriched(run: Run) -> dict[str, str]:
    """Every output, once each carries the business labels of all four sources and both OTLP
    exporters have delivered them (the pipeline works end to end)."""
    bodies: dict[str, str] = {}

    async def ready() -> bool:
        for name, port in zip(("otel /metrics", "dcgm /metrics"), run.ports, strict=True):
            bodies[name] = await run.body(port)
        otel, dcgm = bodies["otel /metrics"], bodies["dcgm /metrics"]
        rotel_text = run.otlp.text()
        return (
            all(
                f'{label}="cc-42"' in otel
                for label in (
                    "container_env_COST_CENTER",
                    "container_label_COST_CENTER",
                    "k8s_pod_label_COST_CENTER",
                    "k8s_pod_annotation_COST_CENTER",
                )
            )
            and 'env_TEAM="vision"' in dcgm
            and rotel_text.count("container.env.TEAM: Str(vision)") >= 2
            and "otelgpu_container_env_refused_keys_total" in otel
        )

    await eventually(ready, lambda: f"enriched output; agent log:\n{run.agent.output[-3000:]}")
    return {**bodies, "rotel output": run.otlp.text()}


async def test_no_planted_secret_leaves_the_agent(run: tuple[Run, Planted]) -> None:
    agent_run, planted = run
    places = await _enriched(agent_run)
    await asyncio.to_thread(agent_run.agent.stop)  # flush: the log is complete after exit
    places["agent log"] = agent_run.agent.output
    leaked = {where: planted.leaked(text) for where, text in places.items()}
    assert {where: found for where, found in leaked.items() if found} == {}
    assert "Traceback" not in places["agent log"]
    # The refusals are visible by reason; under a glob, also the plain-value rule's.
    otel = places["otel /metrics"]
    for reason in ("secret_key", "credential_pair", "credential_flag", "credential_header"):
        assert f'reason="{reason}"' in otel, reason
    assert ('reason="glob_random_value"' in otel) == (agent_run.mode == MODES[0])
    assert "not exporting env key 'SETTING_00'" in places["agent log"]  # by name, once
    assert places["agent log"].count("not exporting env key 'SETTING_00'") == 1
