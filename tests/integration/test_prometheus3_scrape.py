"""A real Prometheus 3 (Debian sid's 3.5.3, `tests/peers/prometheus3.py`) scrapes the running
agent with its default `scrape_protocols`, which prefer OpenMetrics 1.0; and `promtool check
metrics` finds the classic body clean (every self-metric has HELP)."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.integration.agent_process import AgentProcess
from tests.peers.prometheus import PrometheusServer, Result, Scrape, free_port
from tests.peers.prometheus3 import prometheus3_binary

pytestmark = pytest.mark.integration

AGENT = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: 200ms
    simulated: {{gpus: 2}}
exporters:
  prometheus:
    endpoint: 127.0.0.1:{port}
    naming: {naming}
service:
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [prometheus]
"""


@pytest.fixture(scope="session")
def prometheus3() -> str:
    return prometheus3_binary()  # installs once; fails (never skips) when it cannot


@pytest.fixture
def agent(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[int]:
    """The agent on a free port, with the naming the test is parametrized with."""
    port = free_port()
    config = tmp_path / "agent.yaml"
    config.write_text(AGENT.format(port=port, naming=request.param))
    process = AgentProcess("run", "-c", str(config))
    try:
        process.wait_for(r"serving http://")
        yield port
    finally:
        process.stop()


@pytest.fixture
async def prometheus(
    prometheus3: str, agent: int, tmp_path: Path
) -> AsyncIterator[PrometheusServer]:
    server = PrometheusServer(
        tmp_path / "prom", Scrape(target=f"127.0.0.1:{agent}", interval="1s"), binary=prometheus3
    )
    try:
        await server.start()
        yield server
    finally:
        await server.stop()


def names(result: Result) -> set[str]:
    return {r["metric"]["__name__"] for r in result}


async def scraped_fine(prom: PrometheusServer) -> None:
    """Waits for a successful scrape; fails with the target's last error."""
    for _ in range(200):
        targets = await prom.targets()
        if targets and targets[0]["health"] == "up":
            assert targets[0]["lastError"] == ""
            return
        if targets and targets[0]["health"] == "down":
            raise AssertionError(f"scrape failed: {targets[0]['lastError']}")
        await asyncio.sleep(0.2)
    raise AssertionError(f"never scraped: {await prom.targets()}\n{prom.log_tail()}")


@pytest.mark.parametrize("agent", ["otel"], indirect=True)
async def test_prometheus3_ingests_openmetrics_with_counter_names_kept(
    prometheus: PrometheusServer,
) -> None:
    await scraped_fine(prometheus)
    result = await prometheus.wait_for(
        '{__name__=~"hw_.*",job="otelgpu"}',
        lambda r: {"hw_energy_joules_total", "hw_gpu_utilization_ratio"} <= names(r),
        timeout=40,
    )
    assert not {n for n in names(result) if n.endswith("_total")} - {
        "hw_energy_joules_total",
        "hw_errors_total",
    }
    energy = await prometheus.query("hw_energy_joules_total")
    assert len(energy) == 2  # one per simulated GPU, counters keep `_total`
    # The agent says, in its own counter, that Prometheus 3 was answered in OpenMetrics.
    served = await prometheus.wait_for(
        'otelgpu_prometheus_scrapes_total{code="200"}',
        lambda r: any(s["metric"].get("format") == "openmetrics" for s in r),
        timeout=40,
    )
    assert {s["metric"]["format"] for s in served} == {"openmetrics"}


@pytest.mark.parametrize("agent", ["dcgm"], indirect=True)
async def test_prometheus3_keeps_dcgm_counter_names(prometheus: PrometheusServer) -> None:
    await scraped_fine(prometheus)
    result = await prometheus.wait_for(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", lambda r: len(r) == 2, timeout=40
    )
    assert names(result) == {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}
    assert await prometheus.query("DCGM_FI_DEV_GPU_UTIL")


@pytest.mark.parametrize("agent", ["otel"], indirect=True)
def test_promtool_finds_the_classic_body_clean(agent: int) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{agent}/metrics", headers={"Accept": "text/plain;version=0.0.4"}
    )
    body = b""
    for _ in range(100):  # until the first collection and the self-telemetry are in
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read()
        if b"hw_energy_joules_total{" in body and b"otelgpu_prometheus_series" in body:
            break
        time.sleep(0.1)
    assert b"otelgpu_prometheus_series" in body
    lint = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True)
    assert (lint.returncode, lint.stdout + lint.stderr) == (0, b"")


@pytest.mark.parametrize("agent", ["otel"], indirect=True)
async def test_prometheus2_also_gets_openmetrics_with_the_same_names(
    agent: int, tmp_path: Path
) -> None:
    server = PrometheusServer(tmp_path / "prom2", Scrape(target=f"127.0.0.1:{agent}"))
    try:
        await server.start()  # the system's Prometheus (Debian bookworm: 2.42)
        await scraped_fine(server)
        energy = await server.wait_for("hw_energy_joules_total", lambda r: len(r) == 2)
        assert names(energy) == {"hw_energy_joules_total"}
        await server.wait_for(
            'otelgpu_prometheus_scrapes_total{code="200",format="openmetrics"}',
            lambda r: len(r) == 1,
        )
    finally:
        await server.stop()
