"""P7 prints each busy+paused pair's p99 ratio and their median beside the pooled figure: a
stall from outside that lands in one phase of one pair moves the pooled p99, but only that
pair's ratio. Synthetic scrape times, no agent (the smoke run checks the line is printed)."""

from __future__ import annotations

from bench.p7_scrape_never_waits import KEYS, pair_lines, pooled


def _phase(ms: float, stall: float | None = None) -> dict[str, list[float]]:
    """100 scrapes of each kind taking `ms`, the slowest two (p99 and max) `stall` if given."""
    times = [ms] * 98 + [stall or ms] * 2
    return {"plain": [5 * t for t in times], "gzip": times}


def test_each_pair_gets_its_ratio_and_the_median_is_printed() -> None:
    pairs = [
        {"busy": _phase(2.0), "paused": _phase(1.0)},
        {"busy": _phase(3.0), "paused": _phase(2.0)},
        {"busy": _phase(1.0), "paused": _phase(1.0, stall=100.0)},  # a stall while paused
    ]
    assert pair_lines(pairs) == [
        "per pair plain: busy/paused p99 ratio 2.00 1.50 0.01; median 1.50 of 3 pairs",
        "per pair gzip : busy/paused p99 ratio 2.00 1.50 0.01; median 1.50 of 3 pairs",
    ]


def test_a_phase_without_scrapes_is_left_out_of_the_median() -> None:
    empty = {"plain": [], "gzip": []}
    pairs = [
        {"busy": _phase(2.0), "paused": _phase(1.0)},
        {"busy": empty, "paused": _phase(1.0)},
    ]
    assert (
        pair_lines(pairs)[1] == "per pair gzip : busy/paused p99 ratio 2.00; median 2.00 of 1 pair"
    )
    assert pair_lines([{"busy": empty, "paused": empty}]) == []


def test_the_pooled_figures_are_every_pair_s_scrapes_in_order() -> None:
    def scrapes(first: float) -> dict[str, list[float]]:
        return {key: [first, first + 1] for key in KEYS}

    pairs = [
        {"busy": scrapes(1), "paused": scrapes(10)},
        {"busy": scrapes(3), "paused": scrapes(30)},
    ]
    assert pooled(pairs) == {
        "busy": {key: [1, 2, 3, 4] for key in KEYS},
        "paused": {key: [10, 11, 30, 31] for key in KEYS},
    }
