"""The sending queue: a bounded FIFO of encoded requests between the pipeline and the
consumers."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Item:
    """A batch on its way: its encoded request (the protobuf bytes the transport sends; the
    batch's model objects are not kept), gzip-compressed while it waits in the queue
    (`packed`), its point count (the unit every drop is counted in), and what the exporter
    must settle once the request is accepted or given up (`receipt`: for the OTLP exporter,
    the closing points the request carries, owed until one is accepted)."""

    request: bytes
    points: int
    packed: bool = False
    receipt: Any = None


def by_request(_item: Item) -> int:
    """Weight 1 per batch (`sizer: requests`)."""
    return 1


def by_points(item: Item) -> int:
    """Weight of the batch's data points (`sizer: items`)."""
    return item.points


def by_bytes(item: Item) -> int:
    """Weight of the request's bytes as held (`sizer: bytes`): what the item holds in memory,
    but for ~100 bytes of object headers."""
    return len(item.request)


class BatchQueue:
    """Holds items weighing at most `capacity` in all; `offer` never waits, it refuses instead.

    `weigh` gives an item's weight: 1 (the default, `by_request`: capacity counts batches),
    its points (`by_points`) or its bytes as held (`by_bytes`: capacity bounds the memory the
    queue holds, whatever the batch size or the labels' length). `pack` makes the form an
    item waits in (weighed in that form); an item handed straight to an idle consumer is not
    packed. Capacity 0 queues nothing: a batch is accepted only when a consumer is idle and
    takes it at once (a hand-over never takes queue room, however heavy the batch).
    """

    def __init__(
        self,
        capacity: int,
        *,
        weigh: Callable[[Item], int] = by_request,
        pack: Callable[[Item], Item] | None = None,
    ) -> None:
        self._capacity = capacity
        self._weigh = weigh
        self._pack = pack
        self.size = 0  # total weight queued
        self._items: deque[Item] = deque()
        self._waiters: deque[asyncio.Future[Item | None]] = deque()
        # Handed to a waiting consumer that has not resumed yet: in neither list, so `clear`
        # must see them too (a shutdown cut short would otherwise never count them).
        self._handed: dict[asyncio.Future[Item | None], Item] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._items)

    def offer(self, item: Item) -> bool:
        """Queues `item` (or hands it to an idle consumer); False when full or closed."""
        if self._closed:
            return False
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(item)
                self._handed[waiter] = item
                return True
        if self._capacity <= 0:
            return False
        if self._pack is not None:
            item = self._pack(item)
        if self.size + self._weigh(item) <= self._capacity:
            self._push(item, left=False)
            return True
        return False

    async def take(self) -> Item | None:
        """The oldest item, waiting for one; None once closed and empty."""
        if self._items:
            return self._pop()
        if self._closed:
            return None
        waiter: asyncio.Future[Item | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            # Handed over but the consumer was cancelled before it ran: put the item back so
            # shutdown still counts it (unless `clear` already returned it).
            if (item := self._handed.pop(waiter, None)) is not None:
                self._push(item, left=True)
            raise
        finally:
            self._handed.pop(waiter, None)

    def close(self) -> None:
        """Refuses new items and wakes idle consumers; queued items can still be taken."""
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> list[Item]:
        """Removes and returns everything no consumer has started on: queued, or handed to a
        consumer that has not resumed yet."""
        items = [*self._handed.values(), *self._items]
        self._handed.clear()
        self._items.clear()
        self.size = 0
        return items

    def _push(self, item: Item, *, left: bool) -> None:
        (self._items.appendleft if left else self._items.append)(item)
        self.size += self._weigh(item)

    def _pop(self) -> Item:
        item = self._items.popleft()
        self.size -= self._weigh(item)
        return item
