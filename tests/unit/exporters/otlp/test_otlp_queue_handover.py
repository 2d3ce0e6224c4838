"""A batch handed to a waiting consumer that is cancelled before it runs goes back to the
front of the queue (or to `clear`, if shutdown takes it first): never lost, never doubled."""

from __future__ import annotations

import asyncio

from otelgpu.exporterhelper.queue import BatchQueue, Item
from tests.unit.exporters.otlp.batches import numbered_request


def _item(seq: int, points: int) -> Item:
    return Item(numbered_request(seq, points), points)


async def _idle_consumer(queue: BatchQueue) -> asyncio.Task[Item | None]:
    task = asyncio.create_task(queue.take())
    await asyncio.sleep(0)  # now waiting inside take()
    return task


async def test_a_cancelled_hand_over_puts_the_item_back_first() -> None:
    queue = BatchQueue(10, weigh=lambda i: i.points)
    consumer = await _idle_consumer(queue)
    first, second = _item(0, 3), _item(1, 2)
    assert queue.offer(first)  # handed straight to the waiting consumer: no queue room used
    assert (len(queue), queue.size) == (0, 0)
    assert queue.offer(second)  # queued
    consumer.cancel()  # before the consumer ever ran with `first`
    await asyncio.gather(consumer, return_exceptions=True)
    assert consumer.cancelled()
    assert (len(queue), queue.size) == (2, 5)
    assert await queue.take() is first  # back at the front, ahead of what came after it
    assert await queue.take() is second


async def test_clear_takes_an_item_in_hand_over_and_it_is_not_put_back_twice() -> None:
    queue = BatchQueue(10)
    consumer = await _idle_consumer(queue)
    item = _item(0, 4)
    assert queue.offer(item)
    assert queue.clear() == [item]  # shutdown counts it while the consumer has not resumed
    consumer.cancel()
    await asyncio.gather(consumer, return_exceptions=True)
    assert len(queue) == 0 and queue.clear() == []


async def test_a_consumer_that_resumes_keeps_its_item() -> None:
    queue = BatchQueue(0)
    consumer = await _idle_consumer(queue)
    item = _item(0, 1)
    assert queue.offer(item)  # capacity 0: accepted only because a consumer was idle
    assert await consumer is item
    assert queue.clear() == []
    assert not queue.offer(_item(1, 1))  # nobody idle, no room
