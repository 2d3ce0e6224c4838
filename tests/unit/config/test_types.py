"""Durations, sizes, endpoints and key filters."""

from __future__ import annotations

import pytest

from otelgpu.config.types import (
    KeyFilter,
    format_duration,
    parse_duration,
    parse_endpoint,
    parse_size,
    split_endpoint,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("10s", 10.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
        ("250us", 0.00025),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["10", 10, "10 s", "s", "-5s", "", None, "1d"])
def test_bad_durations_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.5, "500ms"), (10.0, "10s"), (300.0, "5m"), (7200.0, "2h"), (90.0, "90s")],
)
def test_format_duration_round_trips(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [("64MiB", 64 * 2**20), ("512KiB", 512 * 1024), ("1GB", 10**9), (4096, 4096), ("12", 12)],
)
def test_sizes(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("bad", ["64 mebibytes", "-1", -1, "1.5GiB", True])
def test_bad_sizes_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="invalid size"):
        parse_size(bad)


@pytest.mark.parametrize("good", ["0.0.0.0:9400", "localhost:0", "[::1]:13133", ":9400"])
def test_endpoints(good: str) -> None:
    assert parse_endpoint(good) == good


def test_an_endpoint_without_host_means_every_interface() -> None:
    """`:9400` as the Collector reads it; asyncio binds every interface for the empty host."""
    assert split_endpoint(":9400") == ("", 9400)
    assert split_endpoint("[::1]:9400") == ("::1", 9400)


@pytest.mark.parametrize("bad", ["localhost", ":", "host:port", "host:70000", 9400])
def test_bad_endpoints(bad: object) -> None:
    with pytest.raises(ValueError, match="invalid endpoint"):
        parse_endpoint(bad)


def test_key_filter_is_fail_closed_and_globs() -> None:
    assert not KeyFilter().allows("TEAM")
    f = KeyFilter(include=["TEAM", "MLFLOW_*"], exclude=["MLFLOW_TRACKING_*"])
    assert f.allows("TEAM") and f.allows("MLFLOW_RUN_ID")
    assert not f.allows("MLFLOW_TRACKING_URI") and not f.allows("team")


@pytest.mark.parametrize(
    "absurd", ["99999999999999999999h", "169h", "604801s", "1" * 400 + "s", "1" * 5000 + "ms"]
)
def test_durations_beyond_seven_days_are_refused(absurd: str) -> None:
    with pytest.raises(ValueError, match=r"is too long: at most 168h \(7 days\)"):
        parse_duration(absurd)


def test_seven_days_is_the_longest_duration() -> None:
    assert parse_duration("168h") == 7 * 24 * 3600


@pytest.mark.parametrize(
    "absurd", ["99999999999999999999GiB", "1025GiB", 2**40 + 1, "9" * 5000, 10**30]
)
def test_sizes_beyond_1024gib_are_refused(absurd: object) -> None:
    with pytest.raises(ValueError, match=r"is too large: at most 1024GiB"):
        parse_size(absurd)


def test_1024gib_is_the_largest_size() -> None:
    assert parse_size("1024GiB") == 2**40
