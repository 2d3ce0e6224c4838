"""Durations, sizes, endpoints and key filters."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.errors import ConfigError
from otelgpu.config import load_config
from otelgpu.config.types import (
    KeyFilter,
    format_duration,
    parse_duration,
    parse_endpoint,
    parse_size,
    split_endpoint,
)
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.service.builtins import builtin_registry
from tests.unit.config.pipelines import AFTER_RECEIVERS


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("10s", 10.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("1500ns", 0.0000015),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["10", 10, "10 s", "s", "-5s", "", None, "1d"])
def test_bad_durations_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(bad)


def _write(tmp_path: Path, receivers: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(receivers + AFTER_RECEIVERS)
    return path


def _messages(tmp_path: Path, receivers: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config([str(_write(tmp_path, receivers))], builtin_registry())
    return [i.message for i in info.value.issues]


def test_a_long_invalid_duration_is_shown_cut_and_still_quoted(tmp_path: Path) -> None:
    value = "x" * 80
    (message,) = _messages(tmp_path, f"receivers:\n  nvml: {{collection_interval: {value}}}\n")
    assert message == (
        f'invalid duration "{"x" * 57}...": expected a number with a unit, such as 500ms, 10s or 5m'
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.5, "500ms"), (10.0, "10s"), (300.0, "5m"), (7200.0, "2h"), (90.0, "90s")],
)
def test_format_duration_round_trips(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64MiB", 64 * 2**20),
        ("512KiB", 512 * 1024),
        ("1GB", 10**9),
        ("64KB", 64_000),
        ("2MB", 2_000_000),
        (4096, 4096),
        ("12", 12),
        ("0", 0),
        ("007KiB", 7 * 1024),
    ],
)
def test_sizes(text: object, size: int) -> None:
    assert parse_size(text) == size


def test_a_size_in_bytes_reads_the_same_with_or_without_the_unit() -> None:
    assert parse_size("1000B") == 1000
    assert parse_size("512 B") == 512
    assert parse_size("4194304") == 4194304


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


def test_a_switch_for_a_metric_the_receiver_lacks_names_it_and_the_valid_ones(
    tmp_path: Path,
) -> None:
    text = "receivers:\n  nvml:\n    metrics: {gpu.bogus: {enabled: false}}\n"
    (message,) = _messages(tmp_path, text)
    assert message.startswith('unknown metric "gpu.bogus": not one of this receiver')
    assert "docs/metrics.md" in message and "did you mean" not in message


def test_a_switch_for_a_catalog_metric_is_kept(tmp_path: Path) -> None:
    switch = "metrics: {nvidia.gpu.up: {enabled: false}, hw.status: {enabled: true}}"
    path = _write(tmp_path, f"receivers:\n  nvml:\n    {switch}\n")
    config = load_config([str(path)], builtin_registry())
    nvml = config.components[Kind.RECEIVER][ComponentID.parse("nvml")]
    assert isinstance(nvml, NvmlReceiverConfig)
    assert "nvidia.gpu.up" not in nvml.enabled_metrics()  # on by default: the switch was kept
    assert "hw.status" in nvml.enabled_metrics()  # off by default
    assert "hw.gpu.utilization" in nvml.enabled_metrics()


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
