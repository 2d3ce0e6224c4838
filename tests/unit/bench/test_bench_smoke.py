"""Every benchmark still runs: each in its tiny `--smoke` mode (seconds, no targets, no timed
assertions), checked only for a clean exit and its figure line, the last one it prints.

The benchmarks that start the agent with its peers (P3, P5) need containerd (and rotel for
P3), like the integration tests: missing, they fail.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NUMBER = r"(\d+(?:\.\d+)?)"

# module → the pattern its last line matches; group 1 is the figure.
FIGURE_LINES = {
    "bench.p1_metrics_endpoint": rf"^P1\b.*?{NUMBER}",
    "bench.p2_cycle_cpu": rf"^P2\b.*?{NUMBER}",
    "bench.p3_rss": rf"^P3 smoke: \d+ series, RSS median {NUMBER} MiB",
    "bench.p4_enrichment_scaling": rf"^P4 smoke: ratio 1000 pods / 10 pods {NUMBER}",
    "bench.p5_scrape_under_slow_sources": rf"^P5 smoke: p99 slow / healthy {NUMBER}",
    "bench.p5_slow_pod_resources": rf"^P5 batch latency p99 slow / healthy: {NUMBER}",
    "bench.p6_nvml": rf"^P6 simulated backend: agent / bare loop {NUMBER}x",
    "bench.p7_scrape_never_waits": rf"^P7\b.*?{NUMBER}",
    "bench.p9_cost_growth": rf"^P9 cycle cost per point, \S+ / \S+: {NUMBER}x",
}
NEEDS_PEERS = {"bench.p3_rss", "bench.p5_scrape_under_slow_sources"}


def run_smoke(
    module: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m <module> --smoke <args>` from the project root (with `env` added to the
    environment), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, "--smoke", *args],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)} | (env or {}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(m, marks=pytest.mark.integration) if m in NEEDS_PEERS else m
        for m in FIGURE_LINES
    ],
)
def test_benchmark_runs_and_prints_its_figure(module: str) -> None:
    done = run_smoke(module)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{module} exited {done.returncode}:\n{output[-3000:]}"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"{module} printed nothing:\n{output[-3000:]}"
    match = re.search(FIGURE_LINES[module], lines[-1])
    assert match, f"{module}'s last line is not its figure line: {lines[-1]!r}"
    assert math.isfinite(float(match[1])), lines[-1]
