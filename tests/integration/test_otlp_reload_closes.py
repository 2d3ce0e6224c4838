"""The running agent pushes two GPU processes over OTLP/HTTP to the real rotel receiver; a
reload turns the per-process metrics off. The new service's exporter took over the memory of
what the old one sent, and closes the processes' series (one point flagged "no recorded
value", NaN, each) once they are overdue, instead of leaving them to the backend's lookback."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.agent_process import AgentProcess
from tests.peers.rotel import ResourceOut, Rotel, rotel

pytestmark = pytest.mark.integration

PIDS = (4242, 4343)
AGENT = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: 200ms
    processes: {processes}
    metrics:
      nvidia.gpu.process.memory.usage: {{enabled: {processes}}}
    simulated:
      gpus:
        - processes: [{{pid: {pids[0]}}}, {{pid: {pids[1]}}}]
exporters:
  otlp_http:
    endpoint: {endpoint}
    compression: none
service:
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [otlp_http]
"""


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Rotel]:
    with rotel(tmp_path / "rotel") as peer:
        yield peer


def _closed_pids(resources: list[ResourceOut]) -> set[object]:
    """The pids whose process series arrived closed."""
    return {
        rm.attributes.get("process.pid")
        for rm in resources
        for metric in rm.metrics
        if metric.name == "nvidia.gpu.process.memory.usage"
        for point in metric.points
        if point.raw_value == "NaN"
    }


def _reports(resources: list[ResourceOut], pid: int) -> int:
    return sum(1 for rm in resources if rm.attributes.get("process.pid") == pid)


async def test_a_reload_that_stops_the_process_series_closes_them(
    tmp_path: Path, receiver: Rotel
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(AGENT.format(processes="true", pids=PIDS, endpoint=receiver.http_endpoint))
    agent = AgentProcess("run", "-c", str(config))
    try:
        # Three reports of each: the exporter has seen how often they come.
        sent = await receiver.wait_for(lambda rs: _reports(rs, PIDS[1]) >= 3, timeout=30)
        assert not _closed_pids(sent)  # live processes are never closed
        config.write_text(
            AGENT.format(processes="false", pids=PIDS, endpoint=receiver.http_endpoint)
        )
        agent.send(signal.SIGHUP)
        agent.wait_for(r"configuration reloaded")
        await receiver.wait_for(lambda rs: _closed_pids(rs) >= set(PIDS), timeout=30)
        assert agent.proc.poll() is None
    finally:
        agent.stop()
