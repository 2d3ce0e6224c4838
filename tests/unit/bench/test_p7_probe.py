"""P7's probe: what it reads back lines slow scrapes up with what overlapped them, per phase,
and its alternating A/B mode splits scrapes by slot (synthetic records, no agent)."""

from __future__ import annotations

import re

import pytest

from bench import p7_probe
from bench.p7_scrape_never_waits import alternate_report
from tests.unit.bench.test_bench_smoke import run_smoke


def _results(busy_gzip: list[tuple[float, float]]) -> dict[str, dict[str, list[float]]]:
    """Scrape results with these busy gzip (asked at, milliseconds) and one of everything
    else, far from any event."""
    results: dict[str, dict[str, list[float]]] = {}
    for phase in ("busy", "paused"):
        results[phase] = {"plain": [1.0], "plain_at": [50.0], "gzip": [1.0], "gzip_at": [50.0]}
    results["busy"]["gzip"] = [ms for _, ms in busy_gzip]
    results["busy"]["gzip_at"] = [at for at, _ in busy_gzip]
    return results


def test_slow_scrapes_are_attributed_to_what_overlapped_them() -> None:
    # 100 fast scrapes at 20..21 s (0.5 to 0.6 ms), one slow one at 30 s that a 4 ms full
    # collection and an ingest overlap; a gen0 collection at 20.5 s overlaps a fast one.
    scrapes = [(20.0 + i / 100, 0.5 + i / 1000) for i in range(100)] + [(30.0, 5.0)]
    probe = {
        "threshold": [700, 10, 10],
        "frozen": 1000,
        "gc": [[2, 30.001, 0.004, 0, 5000], [0, 20.5001, 0.0001, 3, -1]],
        "spans": [["ingest", 29.99, 0.03], ["gzip", 10.0, 0.01]],
        "thread_ids": {},
    }
    windows = [("busy", 19.0, 31.0), ("paused", 40.0, 60.0)]
    lines = p7_probe.inside_report(probe, windows, _results(scrapes))
    gzip_line = next(line for line in lines if line.startswith("busy gzip"))
    assert "(3) overlapping" in gzip_line  # the slowest 2 %: the slow one and two fast ones
    assert "gc2 33%/1%" in gzip_line and "ingest 33%/1%" in gzip_line
    assert "gzip 0%/0%" in gzip_line and "gc0 0%/1%" in gzip_line
    slowest = next(line for line in lines if line.strip().startswith("gzip   5.00 ms"))
    assert "gc2 4.0" in slowest and "ingest 30.0" in slowest
    busy_gen2 = next(line for line in lines if "busy   gen2" in line)
    assert "pause p99   4.00 ms" in busy_gen2
    assert any("generation 2 after a full pass: [5000]" in line for line in lines)


def test_alternating_runs_compare_the_two_halves() -> None:
    # 2 s slots: asked at 10.x s falls in slot 5 (odd: B), at 12.x s in slot 6 (even: A)
    results = _results([(10.0 + i / 100, 4.0) for i in range(50)])
    results["busy"]["gzip"] += [1.0] * 50
    results["busy"]["gzip_at"] += [12.0 + i / 100 for i in range(50)]
    results["paused"]["gzip"] = [2.0, 1.0]
    results["paused"]["gzip_at"] = [10.0, 12.0]
    gzip_line = alternate_report(results, 2.0)[1]
    assert gzip_line.endswith(
        "A busy 1.00 paused 1.00 ratio 1.00; B busy 4.00 paused 2.00 ratio 2.00"
    ), gzip_line


def test_an_experiment_it_cannot_run_is_refused() -> None:
    with pytest.raises(SystemExit, match="unknown setting 'nope'"):
        p7_probe._experiment("nope=1")
    with pytest.raises(SystemExit, match=r"cannot alternate \['render_nice'\]"):
        p7_probe._experiment("alt=2;render_nice=0")


def test_the_benchmark_runs_the_agent_under_the_probe_when_asked() -> None:
    # The default run is the bare agent; --probe must keep working, or its tables would rot.
    # With the fork experiment on: the forked server's memory line must keep coming too.
    done = run_smoke("bench.p7_scrape_never_waits", "--probe", env={"P7_EXPERIMENT": "fork=1"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "agent gc busy   gen0:" in done.stdout
    assert "the HTTP thread blocked" in done.stdout
    busy_floor = [
        line for line in done.stdout.splitlines() if line.startswith("floor") and "no GIL" in line
    ]
    assert [line.split(",")[0] for line in busy_floor] == ["floor  plain", "floor  gzip "]
    pairs = [line for line in done.stdout.splitlines() if line.startswith("per pair")]
    assert [line.split(":")[0] for line in pairs] == ["per pair plain", "per pair gzip "]
    own = [line for line in done.stdout.splitlines() if line.startswith("own process")]
    assert [line.split(":")[0] for line in own] == [
        "own process plain",
        "own process gzip ",
        "own process",  # its VmRSS
    ]
    assert done.stdout.splitlines()[-1].startswith("P7 ")
    forked = next(line for line in done.stdout.splitlines() if line.startswith("forked server"))
    assert re.search(r"MiB: 0s \d+\.\d/\d+\.\d", forked), forked  # sampled at the fork
