"""`scripts/gpu_check` only ever meets a GPU on the device machine, never in CI: run it here on
the simulated backend so that it cannot rot. It must go through every step, say which failed
for want of a GPU (nvidia-smi, the real-NVML tests) and exit non-zero for them, and still
scrape the running agent in both namings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from otelgpu.receivers.nvml.profile import ProfileNvml
from tests.peers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_the_gpu_check_runs_every_step_without_a_gpu(tmp_path: Path) -> None:
    out = tmp_path / "check"
    env = {
        **os.environ,
        "BACKEND": "simulated",
        "OTEL_PORT": str(free_port()),
        "DCGM_PORT": str(free_port()),
        "PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        [str(ROOT / "scripts" / "gpu_check"), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    log = done.stdout + done.stderr
    assert done.returncode != 0, log  # no GPU: the real-NVML tests must fail, not skip
    assert "OTELGPU_EXPECT_GPU=1 but NVML does not start" in (out / "gpu-tests.log").read_text()
    assert "P6 simulated backend: agent / bare loop" in (out / "p6.log").read_text()
    otel = (out / "metrics-idle-otel.txt").read_text()
    dcgm = (out / "metrics-idle-dcgm.txt").read_text()
    assert "hw_gpu_utilization_ratio{" in otel and 'otelgpu_simulated="true"' in otel
    assert "DCGM_FI_DEV_GPU_UTIL{" in dcgm
    assert "VmRSS:" in (out / "rss-idle.txt").read_text()
    # the NVML record, both phases, in the shape the replay reads
    record = ProfileNvml.load(out / "record" / "nvml-profile.json", "load")
    assert record.driver and ProfileNvml.load(out / "record" / "nvml-profile.json", "idle")
    assert "== agent exit 0" in log, log
