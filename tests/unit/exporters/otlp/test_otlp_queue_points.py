"""The sending queue's `sizer: items` (points) and `sizer: requests` (batches), and
`queue_size` written without a sizer, which counts points."""

from __future__ import annotations

import asyncio

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporterhelper.queue import BatchQueue, Item, by_points
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import (
    failed,
    numbered_batch,
    numbered_request,
    queue_size,
    queued_item,
    sent,
)
from tests.unit.exporters.otlp.test_otlp_exporter import ScriptedTransport, make

ID = "otlp"


@pytest.mark.parametrize("spelling", ["bytes", "items", "requests"])
def test_the_collectors_sizer_spellings_are_accepted(spelling: str) -> None:
    config = OtlpExporterConfig.model_validate({"sending_queue": {"sizer": spelling}})
    assert config.sending_queue.sizer == spelling


def test_an_unknown_sizer_is_refused() -> None:
    with pytest.raises(ValueError, match="sizer"):
        OtlpExporterConfig.model_validate({"sending_queue": {"sizer": "pages"}})


async def test_a_points_sized_queue_refuses_what_would_pass_its_capacity(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    gate = asyncio.Event()
    transport = ScriptedTransport(gate)
    exporter = make(telemetry, clock, transport, sending_queue={"queue_size": 10})
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(numbered_batch(0, 50))  # an idle consumer takes it: no queue room used
    await exporter.consume(numbered_batch(1, 6))  # queued: 6 of 10 points
    await exporter.consume(numbered_batch(2, 5))  # 11 > 10: refused, counted
    await exporter.consume(numbered_batch(3, 4))  # fits: 10 of 10
    assert queue_size(telemetry, ID) == 10  # the gauge is in the sizer's unit: points
    assert failed(telemetry, ID) == 5
    gate.set()
    await clock.advance(0)
    await exporter.shutdown()
    assert transport.seqs() == [0, 1, 3]
    assert (sent(telemetry, ID), failed(telemetry, ID)) == (60, 5)


def test_by_default_capacity_counts_batches_whatever_their_points() -> None:
    queue = BatchQueue(2)
    assert queue.offer(queued_item(0, 500)) and queue.offer(queued_item(1, 500))
    assert queue.offer(queued_item(2, 1)) is False  # refused: a bool, as the exporter counts it
    assert (len(queue), queue.size) == (2, 2)


def test_points_weighed_queue_fills_exactly_to_capacity() -> None:
    queue = BatchQueue(5, weigh=lambda i: i.points)
    assert queue.offer(queued_item(0, 2))
    assert queue.offer(queued_item(1, 3))  # 2 + 3 == 5: still fits
    assert not queue.offer(queued_item(2, 1))
    assert (len(queue), queue.size) == (2, 5)


def test_the_queue_weighs_items_by_points_or_by_one() -> None:
    points, by_batches = BatchQueue(10, weigh=by_points), BatchQueue(2)
    big = Item(request=numbered_request(0, 8), points=8)
    assert points.offer(big) and not points.offer(Item(numbered_request(1, 3), 3))
    assert by_batches.offer(big) and by_batches.offer(big) and not by_batches.offer(big)
    assert (points.size, by_batches.size) == (8, 2)
