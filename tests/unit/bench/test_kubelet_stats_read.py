"""bench/kubelet_stats_read.py runs in its `--smoke` mode and reads the whole summary (no timed
assertion: its CPU figures are printed, not checked)."""

from __future__ import annotations

import math
import re

from tests.unit.bench.test_bench_smoke import run_smoke


def test_the_kubelet_stats_benchmark_reads_every_resource_and_prints_its_figure() -> None:
    done = run_smoke("bench.kubelet_stats_read")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    # 20 pods: the node, 20 pods and their 40 containers, read from another process's kubelet
    assert lines[0].startswith("20 pods (56 KB, 61 resources, "), lines
    figure = re.search(r"^KS CPU per read at 20 pods: (\d+(?:\.\d+)?) ms", lines[-1])
    assert figure and math.isfinite(float(figure[1])), lines[-1]
