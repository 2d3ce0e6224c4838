"""The queue's own contract, case by case: what mutation testing showed no test held
(docs/dev/mutation.md)."""

from __future__ import annotations

import asyncio

from otelgpu.exporterhelper.queue import BatchQueue, Item
from tests.unit.exporters.otlp.batches import numbered_request


def _item(seq: int, points: int = 1) -> Item:
    return Item(numbered_request(seq, points), points)


async def _idle_consumer(queue: BatchQueue) -> asyncio.Task[Item | None]:
    task = asyncio.create_task(queue.take())
    await asyncio.sleep(0)  # now waiting inside take()
    return task


def test_by_default_capacity_counts_batches_whatever_their_points() -> None:
    queue = BatchQueue(2)
    assert queue.offer(_item(0, 500)) and queue.offer(_item(1, 500))
    assert queue.offer(_item(2, 1)) is False  # refused: a bool, as the exporter counts it
    assert (len(queue), queue.size) == (2, 2)


def test_points_weighed_queue_fills_exactly_to_capacity() -> None:
    queue = BatchQueue(5, weigh=lambda i: i.points)
    assert queue.offer(_item(0, 2))
    assert queue.offer(_item(1, 3))  # 2 + 3 == 5: still fits
    assert not queue.offer(_item(2, 1))
    assert (len(queue), queue.size) == (2, 5)


async def test_take_is_fifo_and_gives_the_room_back() -> None:
    queue = BatchQueue(5, weigh=lambda i: i.points)
    first, second = _item(0, 2), _item(1, 3)
    queue.offer(first)
    queue.offer(second)
    assert await queue.take() is first
    assert (len(queue), queue.size) == (1, 3)
    assert queue.offer(_item(2, 2))  # the room `first` held is free again
    assert await queue.take() is second


async def test_a_consumer_cancelled_while_idle_is_not_handed_anything() -> None:
    queue = BatchQueue(1)
    gone = await _idle_consumer(queue)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    item = _item(0)
    assert queue.offer(item)  # queued, not handed to the cancelled consumer
    assert (len(queue), queue.size) == (1, 1)
    assert await queue.take() is item


async def test_close_refuses_new_items_but_queued_ones_can_still_be_taken() -> None:
    queue = BatchQueue(3)
    item = _item(0)
    queue.offer(item)
    queue.close()
    assert queue.offer(_item(1)) is False
    assert await queue.take() is item
    assert await queue.take() is None


async def test_close_wakes_idle_consumers_with_none() -> None:
    queue = BatchQueue(3)
    gone = await _idle_consumer(queue)
    gone.cancel()  # a cancelled waiter is skipped, not woken
    await asyncio.gather(gone, return_exceptions=True)
    idle = [await _idle_consumer(queue) for _ in range(2)]
    queue.close()
    assert await asyncio.gather(*idle) == [None, None]


async def test_close_with_nothing_queued_refuses_even_an_idle_consumer() -> None:
    queue = BatchQueue(0)
    queue.close()
    assert not queue.offer(_item(0))
    assert await queue.take() is None


def test_clear_returns_everything_queued_and_frees_the_room() -> None:
    queue = BatchQueue(4, weigh=lambda i: i.points)
    items = [_item(0, 2), _item(1, 2)]
    for item in items:
        queue.offer(item)
    assert queue.clear() == items
    assert (len(queue), queue.size) == (0, 0)
    assert queue.offer(_item(2, 4))
