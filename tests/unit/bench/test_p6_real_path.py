"""P6's real-GPU path (it only runs on a GPU machine, never in CI) driven through the simulated
backend and a stand-in nvidia-smi, so that it cannot rot: the bare loop replays exactly the
agent's calls, GPM samples included, and the like-for-like nvidia-smi comparison is made."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from bench import p6_nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.simulated import SimulatedNvml


def _client() -> SimulatedNvml:
    config = NvmlReceiverConfig.model_validate({"simulated": {"gpus": [{}, {"gpm": False}]}})
    client = SimulatedNvml(config.simulated, time.monotonic)
    client.init()
    return client


def _nvml_calls(client: SimulatedNvml) -> dict[str, int]:
    """The NVML functions called since the last look (the XID watcher's waits left out)."""
    seen = {k: v for k, v in client.calls.items() if v and not k.startswith("nvmlEvent")}
    client.calls.clear()
    return seen


def test_the_bare_loop_makes_the_agents_nvml_calls_gpm_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = _client()
    recv = p6_nvml.receiver({"backend": "nvml"}, client)
    loop = asyncio.new_event_loop()
    for _ in range(3):  # GPM primed, unsupported reads learnt
        loop.run_until_complete(recv.scrape())
    _nvml_calls(client)
    loop.run_until_complete(recv.scrape())
    agent = _nvml_calls(client)
    loop.run_until_complete(recv.shutdown())
    loop.close()
    assert agent["nvmlGpmMetricsGet"] == 1  # one GPU has GPM
    assert agent["nvmlDeviceGetPcieThroughput"] == 2  # the other samples PCIe
    refused: list[NvmlError] = []
    compare = client.gpm_metrics

    def gpm_metrics(*args: Any) -> Any:  # NVML refuses a sample never taken (Invalid Argument)
        try:
            return compare(*args)
        except NvmlError as exc:
            refused.append(exc)
            raise

    monkeypatch.setattr(client, "gpm_metrics", gpm_metrics)
    cycle = p6_nvml.bare_loop(client, p6_nvml.recorded_cycle({"backend": "nvml"}, client))
    _nvml_calls(client)
    refused.clear()  # the bare loop's first priming cycle had only one sample
    for _ in range(2):  # GPM buffers swap each cycle: both turns
        cycle()
        assert _nvml_calls(client) == agent
    assert not refused


def test_the_real_path_compares_like_for_like_with_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '10, 20, 0, 1000, 79000, 500, 81559, 1980'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    p6_nvml.real(10, _client(), every_metric=False)
    out = capsys.readouterr().out
    assert "bare loop: the agent's" in out
    assert "per call (median of 10), slowest first:" in out
    assert "real NVML, the metrics of nvidia-smi's fields" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("P6 real GPU: agent / bare ")
    assert "on the same fields" in last and "on the default metrics" in last
