"""`scripts/gpu_check` only ever meets a GPU on the device machine, never in CI: run it here on
the simulated backend so that it cannot rot. It must go through every step, say which failed
for want of a GPU (nvidia-smi, the real-NVML tests) and exit non-zero for them, and still
scrape the running agent in both namings."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from otelgpu.receivers.nvml.profile import ProfileNvml
from otelgpu.receivers.nvml.replay import BOARDS
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
    # the record holds every call of the default pipeline as it makes it: its replay answers
    # no batch field by field and asks nothing the record lacks
    recorded = (out / "nvml-record.log").read_text()
    assert "== default set replayed (load): 20 of 22 metrics served" in recorded, recorded
    assert "!!" not in recorded, recorded


def _nvml_record() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("nvml_record", str(ROOT / "scripts/nvml_record"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_the_record_check_fails_a_record_without_the_default_pipelines_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shipped boards were recorded with every metric on only: their default-set batches
    are answered field by field, which the next recording on a GPU closes."""
    script = _nvml_record()
    record = json.loads((BOARDS / "nvidia-h100.json").read_text())
    assert script.check_default_replay(record) == 1
    said = capsys.readouterr().out
    assert (
        '!! answered field by field, not recorded as asked: ["gpm_metrics", "", [[10, 1, 21, 20, 5]]]'
        in said
    )
    assert "== default set replayed (load): 19 of 22 metrics served" in said
