"""The agent as a child process with a job-mapping folder: dcgm naming's `hpc_job` label on
the GPU named by the file, following the file as a prolog/epilog rewrites it."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import pytest

from tests.integration.agent_process import AgentProcess
from tests.peers.ports import free_port as _free_port

pytestmark = pytest.mark.integration

CONFIG = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: 200ms
    simulated: {{gpus: 2}}
processors:
  hpc_jobs:
    job_mapping_dir: {folder}
    refresh_interval: 200ms
exporters:
  prometheus:
    endpoint: 127.0.0.1:{port}
    naming: dcgm
service:
  pipelines:
    metrics:
      receivers: [nvml]
      processors: [hpc_jobs]
      exporters: [prometheus]
"""


def _temperature_lines(port: int) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
    except OSError:
        return []  # not listening yet
    return [line for line in body.splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{")]


def _wait_for_job(port: int, gpu: str, job: str | None, timeout: float = 20.0) -> list[str]:
    """Scrapes until GPU `gpu`'s temperature series carries `hpc_job="<job>"` (None: none)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = _temperature_lines(port)
        mine = [line for line in lines if f'gpu="{gpu}"' in line]
        jobs = [re.search(r'hpc_job="([^"]*)"', line) for line in mine]
        if mine and [m.group(1) if m else None for m in jobs] == [job]:
            return lines
        assert time.monotonic() < deadline, f"gpu {gpu} never had hpc_job={job}: {lines}"
        time.sleep(0.05)


def test_job_files_label_their_gpu_in_dcgm_naming(tmp_path: Path, agents) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "1").write_text("4711\n")
    port = _free_port()
    config = tmp_path / "agent.yaml"
    config.write_text(CONFIG.format(folder=folder, port=port))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)

    lines = _wait_for_job(port, "1", "4711")
    assert all("hpc_job" not in line for line in lines if 'gpu="0"' in line)
    (folder / "1").write_text("4712\n4713\n")  # the next job shares the GPU
    _wait_for_job(port, "1", "4712,4713")
    (folder / "1").unlink()  # epilog
    _wait_for_job(port, "1", None)
