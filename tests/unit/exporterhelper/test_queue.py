"""`BatchQueue`'s weights and the form items wait in: the bytes sizer, packing, and a capacity of
0 (the exporter's own use of it, and the rest of the queue: tests/unit/exporters/otlp)."""

from __future__ import annotations

import asyncio

from otelgpu.exporterhelper.queue import BatchQueue, Item, by_bytes, by_points, by_request


def _packed(item: Item) -> Item:
    """A stand-in for gzip: the first 10 bytes."""
    return Item(item.request[:10], item.points, packed=True)


def test_each_sizer_weighs_what_it_names() -> None:
    item = Item(b"r" * 300, points=7)
    assert (by_request(item), by_points(item), by_bytes(item)) == (1, 7, 300)


def test_the_bytes_sizer_bounds_the_bytes_queued() -> None:
    queue = BatchQueue(1000, weigh=by_bytes)
    assert queue.offer(Item(b"a" * 600, 1)) is True
    assert queue.offer(Item(b"b" * 401, 1)) is False  # 1001 bytes would be queued
    assert queue.offer(Item(b"c" * 400, 1)) is True
    assert (queue.size, len(queue)) == (1000, 2)


async def test_an_item_waits_packed_and_is_weighed_packed() -> None:
    queue = BatchQueue(25, weigh=by_bytes, pack=_packed)
    big = Item(b"x" * 1000, 3)
    assert queue.offer(big) is True and queue.offer(big) is True  # 10 bytes each, as held
    assert queue.size == 20
    taken = await queue.take()
    assert taken == Item(b"x" * 10, 3, packed=True)  # the consumer unpacks it
    assert queue.size == 10


async def test_an_item_handed_to_an_idle_consumer_is_not_packed() -> None:
    queue = BatchQueue(25, weigh=by_bytes, pack=_packed)
    consumer = asyncio.create_task(queue.take())
    await asyncio.sleep(0)  # one turn of the loop: the consumer now waits inside take()
    item = Item(b"y" * 1000, 2)
    assert queue.offer(item) is True
    assert await consumer is item  # as it was offered: not packed, and no queue room taken
    assert queue.size == 0


def test_capacity_zero_queues_nothing_however_light() -> None:
    for weigh in (by_request, by_points, by_bytes):
        queue = BatchQueue(0, weigh=weigh)
        assert queue.offer(Item(b"", 0)) is False, weigh  # even an item that weighs nothing
        assert len(queue) == 0
