"""The real CLI with a pull reader (`service::telemetry::metrics::readers`): the agent's own
`otelgpu_*` series are served on the reader's address and no longer on the prometheus
exporter's `/metrics`, which keeps the GPU series; promtool finds the reader's body clean; a
reload that keeps the reader keeps its listener."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.integration.agent_process import AgentProcess, scrape, scrape_until
from tests.peers.ports import free_port

pytestmark = pytest.mark.integration

PIPELINE = """\
receivers:
  nvml: {{backend: simulated, collection_interval: 1s, simulated: {{gpus: 2}}}}
exporters:
  prometheus: {{endpoint: "127.0.0.1:{exporter}"}}
service:
  pipelines:
    metrics: {{receivers: [nvml], exporters: [prometheus]}}
  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {reader}
"""
OWN = re.compile(r"^(# (HELP|TYPE) )?otelgpu_", re.MULTILINE)


def test_the_agents_own_metrics_move_to_the_readers_endpoint(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    exporter, reader = free_port(), free_port()
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(exporter=exporter, reader=reader))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(rf"serving the agent's own metrics on http://127.0.0.1:{reader}/metrics")
    # the exporter's listener is another component's: it says so when it listens
    agent.wait_for(rf"serving http://127.0.0.1:{exporter}/metrics")

    gpus = scrape_until(exporter, "hw_gpu_utilization_ratio{")
    assert OWN.findall(gpus) == [], gpus
    own = scrape_until(reader, 'otelgpu_receiver_points_total{receiver="nvml"}')
    assert "otelgpu_build_info{version=" in own and "otelgpu_source_up" in own
    assert "hw_" not in own  # the pipelines' series stay on the exporter
    lint = subprocess.run(["promtool", "check", "metrics"], input=own.encode(), capture_output=True)
    assert (lint.returncode, lint.stdout + lint.stderr) == (0, b"")

    before = len(agent.lines)
    agent.send(signal.SIGHUP)
    agent.wait_for(r"own metrics on .*\(listener kept through the reload\)", after=before)
    agent.wait_for("configuration reloaded", after=before)
    assert "otelgpu_config_reload_failures_total 0" in scrape(reader)
    assert OWN.findall(scrape(exporter)) == []
    assert agent.stop() == 0
