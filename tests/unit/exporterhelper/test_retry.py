"""`Backoff`: the waits between attempts of one request, with the jitter's random numbers given,
so every delay is exact (the exporter's own use of it: tests/unit/exporters/otlp)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

from otelgpu.component.errors import ExportError
from otelgpu.exporterhelper.config import RetryConfig
from otelgpu.exporterhelper.retry import Backoff

RETRYABLE = ExportError("gRPC UNAVAILABLE", retryable=True)
PERMANENT = ExportError("HTTP 400", retryable=False)
START = 1000.0


def numbers(*values: float) -> Callable[[], float]:
    """A random source that gives `values`, in order."""
    given = iter(values)
    return lambda: next(given)


def backoff(rand: Callable[[], float] = lambda: 0.5, **options: Any) -> Backoff:
    return Backoff(RetryConfig.model_validate(options), START, rand=rand)


def delays(
    b: Backoff, times: Iterable[float], error: ExportError = RETRYABLE
) -> list[float | None]:
    return [b.next_delay(error, now) for now in times]


def test_without_jitter_each_wait_is_the_last_times_the_multiplier_up_to_the_cap() -> None:
    b = backoff(randomization_factor=0, max_elapsed_time="0s")  # the defaults: 5s, x1.5, 30s
    assert delays(b, [START] * 7) == [5, 7.5, 11.25, 16.875, 25.3125, 30, 30]


def test_jitter_draws_each_wait_from_the_interval_plus_or_minus_the_factor() -> None:
    # interval x (1 - f + 2 f r): r = 0 gives the shortest wait, r near 1 the longest.
    assert delays(backoff(numbers(0.0)), [START]) == [2.5]
    assert delays(backoff(numbers(0.25)), [START]) == [3.75]
    assert delays(backoff(numbers(0.75)), [START]) == [6.25]
    assert delays(backoff(numbers(0.25), randomization_factor=0.2), [START]) == [4.5]


def test_jitter_scales_the_wait_only_the_interval_grows_by_the_multiplier() -> None:
    b = backoff(numbers(0.0, 0.5, 0.25), multiplier=2, initial_interval="4s")
    assert delays(b, [START] * 3) == [2.0, 8.0, 12.0]  # intervals 4, 8, 16


def test_permanent_errors_and_a_disabled_retry_get_no_wait() -> None:
    assert delays(backoff(), [START], PERMANENT) == [None]
    assert delays(backoff(enabled=False), [START]) == [None]
    assert delays(backoff(enabled=False), [START], PERMANENT) == [None]


def test_a_longer_delay_the_server_asked_for_replaces_the_computed_one() -> None:
    throttled = ExportError("HTTP 429", retryable=True, retry_after=60.0)
    assert delays(backoff(), [START], throttled) == [60.0]
    brief = ExportError("HTTP 503", retryable=True, retry_after=1.0)
    assert delays(backoff(), [START], brief) == [5.0]  # the computed wait is longer: kept
    # The server's delay does not stop the interval from growing.
    b = backoff(randomization_factor=0)
    assert [b.next_delay(throttled, START), b.next_delay(RETRYABLE, START)] == [60.0, 7.5]


def test_a_server_delay_on_a_permanent_error_is_no_reason_to_retry() -> None:
    refused = ExportError("HTTP 400", retryable=False, retry_after=5.0)
    assert delays(backoff(), [START], refused) == [None]


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (START, 4.0),
        (START + 16.0, 4.0),  # the wait ends at exactly max_elapsed_time: still within
        (START + 16.5, None),  # it would end past it
        (START + 100.0, None),
    ],
)
def test_a_wait_that_would_end_past_max_elapsed_time_gives_up(
    now: float, expected: float | None
) -> None:
    b = backoff(initial_interval="4s", max_interval="4s", max_elapsed_time="20s")
    assert b.next_delay(RETRYABLE, now) == expected


def test_a_server_delay_counts_towards_max_elapsed_time() -> None:
    throttled = ExportError("HTTP 429", retryable=True, retry_after=30.0)
    assert delays(backoff(max_elapsed_time="20s"), [START], throttled) == [None]


def test_max_elapsed_time_zero_retries_forever() -> None:
    b = backoff(randomization_factor=0, max_interval="5s", max_elapsed_time="0s")
    assert delays(b, [START + 10.0**6, START + 10.0**9]) == [5.0, 5.0]


def test_max_elapsed_time_counts_from_the_request_s_own_start() -> None:
    config = RetryConfig.model_validate({"randomization_factor": 0, "max_elapsed_time": "20s"})
    assert Backoff(config, 1000.0).next_delay(RETRYABLE, 1016.0) is None  # 1021 > 1000 + 20
    assert Backoff(config, 1010.0).next_delay(RETRYABLE, 1016.0) == 5.0  # 1021 <= 1010 + 20
