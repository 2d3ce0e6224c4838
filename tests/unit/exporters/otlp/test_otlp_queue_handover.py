"""How the sending queue hands batches to its consumers: first in, first out, the room given
back on each take; a batch handed to a waiting consumer that is cancelled before it runs goes
back to the front of the queue (or to `clear`, if shutdown takes it first): never lost, never
doubled; `close` refuses new batches and wakes idle consumers, and `clear` empties the queue."""

from __future__ import annotations

import asyncio

from otelgpu.exporterhelper.queue import BatchQueue
from tests.unit.exporters.otlp.batches import idle_consumer, queued_item


async def test_take_is_fifo_and_gives_the_room_back() -> None:
    queue = BatchQueue(5, weigh=lambda i: i.points)
    first, second = queued_item(0, 2), queued_item(1, 3)
    queue.offer(first)
    queue.offer(second)
    assert await queue.take() is first
    assert (len(queue), queue.size) == (1, 3)
    assert queue.offer(queued_item(2, 2))  # the room `first` held is free again
    assert await queue.take() is second


async def test_a_consumer_cancelled_while_idle_is_not_handed_anything() -> None:
    queue = BatchQueue(1)
    gone = await idle_consumer(queue)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    item = queued_item(0)
    assert queue.offer(item)  # queued, not handed to the cancelled consumer
    assert (len(queue), queue.size) == (1, 1)
    assert await queue.take() is item


async def test_a_cancelled_hand_over_puts_the_item_back_first() -> None:
    queue = BatchQueue(10, weigh=lambda i: i.points)
    consumer = await idle_consumer(queue)
    first, second = queued_item(0, 3), queued_item(1, 2)
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
    consumer = await idle_consumer(queue)
    item = queued_item(0, 4)
    assert queue.offer(item)
    assert queue.clear() == [item]  # shutdown counts it while the consumer has not resumed
    consumer.cancel()
    await asyncio.gather(consumer, return_exceptions=True)
    assert len(queue) == 0 and queue.clear() == []


async def test_a_consumer_that_resumes_keeps_its_item() -> None:
    queue = BatchQueue(0)
    consumer = await idle_consumer(queue)
    item = queued_item(0, 1)
    assert queue.offer(item)  # capacity 0: accepted only because a consumer was idle
    assert await consumer is item
    assert queue.clear() == []
    assert not queue.offer(queued_item(1, 1))  # nobody idle, no room


async def test_close_refuses_new_items_but_queued_ones_can_still_be_taken() -> None:
    queue = BatchQueue(3)
    item = queued_item(0)
    queue.offer(item)
    queue.close()
    assert queue.offer(queued_item(1)) is False
    assert await queue.take() is item
    assert await queue.take() is None


async def test_close_wakes_idle_consumers_with_none() -> None:
    queue = BatchQueue(3)
    gone = await idle_consumer(queue)
    gone.cancel()  # a cancelled waiter is skipped, not woken
    await asyncio.gather(gone, return_exceptions=True)
    idle = [await idle_consumer(queue) for _ in range(2)]
    queue.close()
    assert await asyncio.gather(*idle) == [None, None]


async def test_close_with_nothing_queued_refuses_even_an_idle_consumer() -> None:
    queue = BatchQueue(0)
    queue.close()
    assert not queue.offer(queued_item(0))
    assert await queue.take() is None


def test_clear_returns_everything_queued_and_frees_the_room() -> None:
    queue = BatchQueue(4, weigh=lambda i: i.points)
    items = [queued_item(0, 2), queued_item(1, 2)]
    for item in items:
        queue.offer(item)
    assert queue.clear() == items
    assert (len(queue), queue.size) == (0, 0)
    assert queue.offer(queued_item(2, 4))
