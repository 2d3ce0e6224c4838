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

from bench import dcgm_default_counters as dcgm
from bench.dcgm_default_counters import DEFAULT_COUNTERS
from bench.fleet_cost import Endpoints, itemise_node, readings_of
from otelgpu.receivers.nvml.dcgm_fields import DCGM_DEFAULT_COUNTERS

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
    "bench.fleet_cost": rf"^P8 naming dcgm: series {NUMBER}x",
    "bench.otlp_ended_steady": rf"^ended-series memory, steady: {NUMBER} instructions",
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


SIDE = re.compile(
    r"^(?P<who>[^:]+): series (?P<series>\d+) = (?P<on_gpus>\d+) on (?P<gpus>\d+) GPUs "
    r"\((?P<each>\d+) each\) \+ (?P<agent>\d+) agent; GPU endpoint scrape (?P<plain>\d+) B"
    r" plain, (?P<gzip>\d+) B gzip, served (?P<served>plain|gzip); (?P<line>[\d.]+) B per series"
    r" line; OTLP [^;]*?(?:; (?P<apart>\d+) on the telemetry endpoint :8888, (?P<apart_plain>\d+)"
    r" B plain)?(?:; (?P<status>\d+) on the GPU status endpoint :9401, (?P<status_plain>\d+) B"
    r" plain, (?P<status_gzip>\d+) B gzip)?$",
    re.MULTILINE,
)
ITEMISED = re.compile(
    r"^  dcgm-equivalent \(DCGM_FI_\*\): (?P<equivalent>\d+) series, (?P<ratio>[\d.]+)x\n"
    r"(?P<extras>(?:  \+ .*\n)+)",
    re.M,
)
EXTRA = re.compile(r"^  \+ (?P<family>\S+) \((?P<what>[^)]*)\): (?P<n>\d+), (?P<where>.*)$", re.M)
RATIO = re.compile(r"^(?P<who>[^:]+) / dcgm-exporter: series (?P<series>[\d.]+)x", re.MULTILINE)
ITEMS = re.compile(
    r"^(?P<who>[^:]+), GPU 0: (?P<total>\d+) series = (?P<theirs>\d+) with dcgm-exporter's"
    r" readings \+ (?P<ours>\d+) only ours \((?P<list>[^)]*)\)$",
    re.M,
)
FLEET = re.compile(
    r"^  (?P<who>[^:]+): (?P<series>\d+) active series, (?P<rate>\d+) samples/s", re.M
)


def test_fleet_cost_figures_add_up() -> None:
    done = run_smoke("bench.fleet_cost", "--nodes", "1000")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    out = done.stdout
    sides = {m["who"]: m for m in SIDE.finditer(out)}
    assert set(sides) == {"ours, naming otel", "ours, naming dcgm", "dcgm-exporter"}, out
    for who, side in sides.items():
        series, gpus = int(side["series"]), int(side["gpus"])
        assert gpus == 2, who  # the smoke node
        assert int(side["on_gpus"]) == int(side["each"]) * gpus, who
        assert series == int(side["on_gpus"]) + int(side["agent"]), who
        assert 0 < int(side["gzip"]) < int(side["plain"]), who
        # every series line of the GPU endpoint is in its body, with the HELP and TYPE lines
        on_gpu_endpoint = series - int(side["apart"] or 0) - int(side["status"] or 0)
        assert float(side["line"]) * on_gpu_endpoint <= int(side["plain"]), who
    theirs = sides["dcgm-exporter"]
    assert int(theirs["each"]) == len(DEFAULT_COUNTERS) and int(theirs["agent"]) == 0
    assert theirs["served"] == "plain" and sides["ours, naming dcgm"]["served"] == "gzip"
    for ratio in RATIO.finditer(out):
        expected = int(sides[ratio["who"]]["series"]) / int(theirs["series"])
        assert float(ratio["series"]) == pytest.approx(expected, abs=0.005), ratio["who"]
    items = {m["who"]: m for m in ITEMS.finditer(out)}
    assert set(items) == {"ours, naming otel", "ours, naming dcgm"}, out
    for who, row in items.items():
        total, theirs, ours = int(row["total"]), int(row["theirs"]), int(row["ours"])
        assert total == theirs + ours == int(sides[who]["each"]), who
        assert ours == sum(int(n) for n in re.findall(r" (\d+)(?:,|$)", row["list"])), who
        assert theirs > 0 and "nvidia_gpu_allocation_ratio 1" in row["list"], who
    fleet = {m["who"]: m for m in FLEET.finditer(out)}
    assert set(fleet) == set(sides), out
    for who, row in fleet.items():
        assert int(row["series"]) == int(sides[who]["series"]) * 1000, who
        assert int(row["rate"]) == round(int(row["series"]) / 15), who


def test_the_benchs_dcgm_table_is_the_catalogs_default_counters() -> None:
    assert {c.field for c in DEFAULT_COUNTERS} == DCGM_DEFAULT_COUNTERS
    assert len(DEFAULT_COUNTERS) == len(DCGM_DEFAULT_COUNTERS)  # no field twice


def test_dcgm_exporters_body_carries_the_readings_it_is_given_as_it_prints_them() -> None:
    gpu = dcgm.Device(0, "GPU-a", "00000000:18:00.0", "NVIDIA H100 80GB HBM3")
    ours = (
        'DCGM_FI_DEV_POWER_USAGE{UUID="GPU-a",gpu="0"} 352.5\n'
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-a",gpu="0"} 51\n'
        'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-a",err_code="79"} 79\n'
    )
    readings = readings_of(ours)
    assert readings == {
        ("GPU-a", ""): {"DCGM_FI_DEV_POWER_USAGE": 352.5, "DCGM_FI_DEV_GPU_UTIL": 51}
    }
    body, series = dcgm.render([gpu], "node-1", "550.54.15", readings)
    values = dict(re.findall(r"^(DCGM_FI_\w+)\{.*\} (\S+)$", body.decode(), re.M))
    assert series == len(DEFAULT_COUNTERS) == len(values)
    assert values["DCGM_FI_DEV_POWER_USAGE"] == "352.500000"  # a double, printed with %f
    assert values["DCGM_FI_DEV_GPU_UTIL"] == "51"
    assert values["DCGM_FI_DEV_XID_ERRORS"] == "0"  # no XID before one: not the agent's code
    assert values["DCGM_FI_DEV_SM_CLOCK"] == "1980"  # no reading given: the busy-H100 one


def test_fleet_cost_itemises_every_series_beyond_dcgm_exporters() -> None:
    """naming dcgm: the series with dcgm-exporter's fields plus each itemised family are the
    whole bill; by the chart's default the agent's own are on the telemetry endpoint (and
    nowhere else), health and info on the GPU status endpoint, the allocation series on the
    GPU endpoint."""
    done = run_smoke("bench.fleet_cost")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    out = done.stdout
    sides = {m["who"]: m for m in SIDE.finditer(out)}
    ours, theirs = sides["ours, naming dcgm"], sides["dcgm-exporter"]
    (block,) = ITEMISED.finditer(out)
    extras = {m["family"]: m for m in EXTRA.finditer(block["extras"])}
    equivalent = int(block["equivalent"])
    assert equivalent + sum(int(m["n"]) for m in extras.values()) == int(ours["series"]), out
    assert float(block["ratio"]) == pytest.approx(equivalent / int(theirs["series"]), abs=0.005)
    own = extras.pop("otelgpu_*")
    assert own["where"] == "telemetry endpoint :8888" and int(own["n"]) == int(ours["apart"])
    assert int(ours["apart"]) == int(ours["agent"]) > 0  # all of them, none left on :9400
    assert {"nvidia_gpu_allocation_ratio", "nvidia_gpu_up", "hw_gpu_info"} <= set(extras), out
    status = {"nvidia_gpu_up", "hw_gpu_info"}
    for family, row in extras.items():
        where = "GPU status endpoint :9401" if family in status else "GPU endpoint :9400"
        assert row["where"] == where, family
        assert "NOT ITEMISED" not in row["what"], family
    assert int(ours["status"]) == sum(int(extras[f]["n"]) for f in status)
    apart = run_smoke("bench.fleet_cost", "--status-beside")
    assert apart.returncode == 0, apart.stderr[-3000:]
    rows = {m["family"]: m for m in EXTRA.finditer(apart.stdout)}
    assert {rows[f]["where"] for f in status} == {"GPU endpoint :9400"}
    beside = run_smoke("bench.fleet_cost", "--telemetry-beside")
    assert beside.returncode == 0, beside.stderr[-3000:]
    side = {m["who"]: m for m in SIDE.finditer(beside.stdout)}["ours, naming dcgm"]
    assert side["apart"] is None and int(side["agent"]) == int(ours["agent"])
    rows = {m["family"]: m for m in EXTRA.finditer(beside.stdout)}
    assert rows["otelgpu_*"]["where"] == "GPU endpoint :9400"


def test_a_family_the_migration_guide_does_not_list_is_not_itemised() -> None:
    where = Endpoints(9400, 8888)
    got = itemise_node(
        {"DCGM_FI_DEV_GPU_UTIL": 2, "nvidia_gpu_up": 2, "otelgpu_source_up": 3, "hw_new": 2},
        where,
    )
    assert got.equivalent == 2 and not got.all_itemised
    assert got.extras == [
        ("nvidia_gpu_up", "health", 2, "GPU endpoint :9400"),
        ("otelgpu_source_up", "the agent's own", 3, "telemetry endpoint :8888"),
        ("hw_new", None, 2, "GPU endpoint :9400"),
    ]
    assert itemise_node({"DCGM_FI_DEV_GPU_UTIL": 2, "nvidia_gpu_up": 2}, where).all_itemised
