"""P7 compares the busy agent with the paused one only when both served the same bodies: a
paused phase that serves fewer series (the GPM-derived ones need two samples, which a 1 h
cycle right after a reload never took) times less work. Synthetic results, no agent; the
smoke run (test_bench_smoke) runs the whole benchmark, whose phases must pass this check."""

from __future__ import annotations

from bench.p7_scrape_never_waits import KEYS, unlike


def _results(busy: tuple[int, int], paused: tuple[int, int]) -> dict[str, dict[str, list[float]]]:
    """Three scrapes of each kind per phase with these (plain, gzip) body sizes."""
    results: dict[str, dict[str, list[float]]] = {}
    for phase, (plain, gzip) in (("busy", busy), ("paused", paused)):
        results[phase] = {key: [1.0, 1.0, 1.0] for key in KEYS}
        results[phase]["plain_bytes"] = [plain, plain + 300, plain - 300]
        results[phase]["gzip_bytes"] = [gzip, gzip, gzip + 20]
    return results


def test_phases_that_served_the_same_bodies_are_like_for_like() -> None:
    # values change from scrape to scrape by a few hundred bytes, never by 1 %
    assert unlike(_results((6_351_719, 159_908), (6_351_000, 159_700))) == []


def test_a_paused_phase_serving_fewer_series_is_named() -> None:
    # 10813 series busy, 9289 paused: the paused phase had no GPM series after one sample
    problems = unlike(_results((6_351_719, 159_908), (5_450_125, 135_000)))
    assert problems == [
        "plain bodies were 6351719 B busy but 5450125 B paused",
        "gzip bodies were 159908 B busy but 135000 B paused",
    ]


def test_one_kind_alone_is_named() -> None:
    assert unlike(_results((1_000_000, 50_000), (1_000_000, 40_000))) == [
        "gzip bodies were 50000 B busy but 40000 B paused"
    ]
