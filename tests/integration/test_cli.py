"""The real CLI as a child process: run, signals, reload, exit codes."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.agent_process import AgentProcess

pytestmark = pytest.mark.integration

PIPELINE = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: 200ms
    simulated: {{gpus: 2}}
processors:
  filter:
    metrics: {{include: [hw.gpu.utilization]}}
  attributes:
    actions:
      - {{key: pipeline_tag, action: upsert, value: {tag}}}
exporters:
  debug:
    verbosity: detailed
service:
  telemetry:
    logs: {{level: info}}
  pipelines:
    metrics:
      receivers: [nvml]
      processors: [filter, attributes]
      exporters: [debug]
"""


@pytest.fixture
def agents() -> Iterator[list[AgentProcess]]:
    started: list[AgentProcess] = []
    yield started
    for agent in started:
        agent.kill()


def test_run_filters_and_labels_then_stops_cleanly_on_sigterm(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r"hw\.gpu\.utilization\{.*pipeline_tag='v1'")
    agent.wait_for(r"batch: 2 resources", timeout=5)
    assert code_of(agent) == 0
    points = [line for line in agent.lines if " = " in line]
    assert points and all("hw.gpu.utilization" in line for line in points)  # the filter held
    assert "stopped" in agent.lines[-1]


def test_sigint_also_stops_cleanly(tmp_path: Path, agents: list[AgentProcess]) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r"pipeline_tag='v1'")
    assert agent.stop(signal.SIGINT) == 0


def test_sighup_with_a_broken_file_keeps_the_old_pipelines(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r"pipeline_tag='v1'")

    config.write_text(
        PIPELINE.format(tag="v2").replace("200ms", "soon").replace("filter:\n", "filtr:\n", 1)
    )
    agent.send(signal.SIGHUP)
    first = agent.wait_for(
        r"reload rejected: .*pipeline\.yaml:\d+:\d+: receivers::nvml::collection_interval: invalid duration"
    )
    agent.wait_for(
        r"reload rejected: .*pipeline\.yaml:\d+:\d+: processors::filtr: unknown processor type",
        after=0,
    )
    agent.wait_for(r"keeping the running configuration")
    agent.wait_for(r"pipeline_tag='v1'", after=first)  # the old pipelines still run

    config.write_text(PIPELINE.format(tag="v2"))
    agent.send(signal.SIGHUP)
    agent.wait_for(r"configuration reloaded")
    agent.wait_for(r"pipeline_tag='v2'")
    assert agent.stop() == 0


def test_a_bad_config_exits_2_and_starts_nothing(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(PIPELINE.format(tag="v1").replace("gpus: 2", "gpus: two"))
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "run", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"{config}:5:" in result.stderr and "receivers::nvml::simulated::gpus" in result.stderr
    assert "starting" not in result.stderr


def test_a_component_that_cannot_start_exits_1_naming_it(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = tmp_path / "pipeline.yaml"
        text = PIPELINE.format(tag="v1").replace(
            "service:\n",
            f"extensions:\n  health_check: {{endpoint: 127.0.0.1:{port}}}\nservice:\n  extensions: [health_check]\n",
            1,
        )
        config.write_text(text)
        result = subprocess.run(
            [sys.executable, "-m", "otelgpu", "run", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert 'failed to start "health_check" extension' in result.stderr


def code_of(agent: AgentProcess) -> int:
    return agent.stop(signal.SIGTERM)
