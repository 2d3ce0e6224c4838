"""`sending_queue` sizing as an operator writes it: what `queue_size` counts and how big the
queue is when only a `sizer` is written (the Collector's exporterhelper rules)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from otelgpu.config.loader import load
from otelgpu.config.render import render
from otelgpu.config.schema import validate
from otelgpu.exporterhelper.config import DEFAULT_QUEUE_BYTES, QueueConfig
from otelgpu.service.builtins import builtin_registry


@pytest.mark.parametrize(
    ("options", "sizer", "size"),
    [
        ({}, "bytes", DEFAULT_QUEUE_BYTES),
        ({"queue_size": 5000}, "items", 5000),  # written without a sizer: points
        ({"sizer": "items"}, "items", 100_000),
        ({"sizer": "requests"}, "requests", 100_000),
        ({"sizer": "bytes"}, "bytes", DEFAULT_QUEUE_BYTES),
        ({"sizer": "items", "queue_size": 50}, "items", 50),
        ({"sizer": "requests", "queue_size": 7}, "requests", 7),
        ({"sizer": "bytes", "queue_size": 1 << 20}, "bytes", 1 << 20),
    ],
)
def test_queue_size_counts_what_the_sizer_names_and_defaults_per_sizer(
    options: dict[str, Any], sizer: str, size: int
) -> None:
    queue = QueueConfig.model_validate(options)
    assert (queue.sizer, queue.queue_size) == (sizer, size)


def test_a_written_sizer_keeps_the_other_options_as_written() -> None:
    queue = QueueConfig.model_validate(
        {"sizer": "requests", "num_consumers": 4, "enabled": False, "drain_timeout": "3s"}
    )
    assert (queue.enabled, queue.num_consumers, queue.drain_timeout) == (False, 4, 3.0)
    assert queue.queue_size == 100_000


def test_print_config_shows_the_capacity_each_sizer_got() -> None:
    text = """\
receivers: {nvml: {backend: simulated}}
exporters:
  otlp: {sending_queue: {sizer: requests}}
  otlp_http: {sending_queue: {queue_size: 2000}}
service: {pipelines: {metrics: {receivers: [nvml], exporters: [otlp, otlp_http]}}}
"""
    printed = render(validate(load([("p.yaml", text)], environ={}), builtin_registry()))
    otlp, otlp_http = printed.split("\n  otlp_http:\n")
    assert "sizer: requests\n      queue_size: 100000\n" in otlp
    assert "sizer: items\n      queue_size: 2000\n" in otlp_http


def test_a_queue_size_without_a_sizer_is_warned_once_by_validate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`queue_size` alone counts points while the default sizer counts bytes: `validate` says
    so, once, for the exporter that wrote it, and says nothing when the sizer is written."""
    text = """\
receivers: {nvml: {backend: simulated}}
exporters:
  otlp: {sending_queue: {queue_size: 2000}}
  otlp_http: {sending_queue: {sizer: items, queue_size: 3000}}
service: {pipelines: {metrics: {receivers: [nvml], exporters: [otlp, otlp_http]}}}
"""
    with caplog.at_level(logging.WARNING, logger="otelgpu.config"):
        validate(load([("p.yaml", text)], environ={}), builtin_registry())
    warnings = [r.getMessage() for r in caplog.records if "sizer" in r.getMessage()]
    # the config loader's logger, which log lines name, as every config warning
    assert {r.name for r in caplog.records if "sizer" in r.getMessage()} == {"otelgpu.config"}
    assert warnings == [
        "sending_queue: queue_size 2000 is written without a sizer, so it counts data points "
        '(sizer: items), not bytes as the default sizer does; write "sizer: items" to keep '
        'this meaning, or "sizer: bytes" for a memory bound'
    ]
