"""A reload must not take series away: every scrape around it serves every device's GPM-derived
series (DCGM's PROF fields, the PCIe rates on Hopper). GPM needs two samples; a reload's new
receiver used to collect at once with one, and its first collection replaced each GPU's series
without them for one interval: a gap in every such graph, and `absent()` alerts firing, at
each SIGHUP. The real CLI as a child process, scraped back to back across the reload."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from tests.integration.agent_process import AgentProcess, scrape
from tests.peers.ports import free_port

pytestmark = pytest.mark.integration

PIPELINE = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: {interval}
    simulated: {{gpus: 2}}
exporters:
  prometheus:
    endpoint: 127.0.0.1:{port}
service:
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [prometheus]
"""
GPM_SERIES = re.compile(r"^nvidia_gpu_graphics_active_ratio\{", re.MULTILINE)
RELOADED = re.compile(r"^otelgpu_config_last_reload_success_timestamp_seconds (\S+)$", re.MULTILINE)


def _until(port: int, done: re.Pattern[str], timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            body = scrape(port)
        except OSError:
            body = ""
        if len(done.findall(body)) == 2:
            return body
        time.sleep(0.05)
    raise AssertionError(f"/metrics never had {done.pattern} twice")


def test_no_scrape_across_a_reload_lacks_the_gpm_series(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    port = free_port()
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(interval="1s", port=port))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    before = RELOADED.search(_until(port, GPM_SERIES))
    assert before is not None

    config.write_text(PIPELINE.format(interval="900ms", port=port))  # the receiver is rebuilt
    agent.send(signal.SIGHUP)
    lacking, scrapes, reloaded_at = [], 0, None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        body = scrape(port)
        scrapes += 1
        found = len(GPM_SERIES.findall(body))
        if found != 2:
            lacking.append(found)
        reloaded = RELOADED.search(body)
        if reloaded_at is None and reloaded is not None and reloaded[1] != before[1]:
            reloaded_at = time.monotonic()
        if reloaded_at is not None and time.monotonic() > reloaded_at + 2.5:
            break  # the new receiver has collected at least twice
        time.sleep(0.02)
    assert reloaded_at is not None, agent.output[-3000:]
    assert not lacking, f"{len(lacking)} of {scrapes} scrapes lacked GPM series: {lacking}"
    assert agent.stop() == 0
