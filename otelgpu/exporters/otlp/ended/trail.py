"""What a batch sends, written down by the encoder as it writes the batch (`Trail`), so that a
steady batch costs the memory one comparison of two lists in C."""

from __future__ import annotations

from typing import Any


class Trail:
    """A batch as the memory tells batches apart, filled by `encode.encode_bytes` from what it
    has at hand as it writes the batch.

    `series` holds, per metric, its descriptor (name, description, unit, kind, monotonic: the
    encoder's cached tuple, one object per descriptor) then each point's encoded attributes
    (the bytes sent, the cache's one object per attribute set); after a resource's metrics,
    its identity, scope (as encoded), schema URL and metric count. Descriptors are tuples and
    attributes bytes, so the list parses one way only (read from its end, each resource's
    metric count, then each metric's descriptor after its points): two equal lists are two
    batches that send the same series from the same resources in the same order. Compared
    element by element, by identity first, what the cache shares from one batch to the next
    costs no comparison of its contents.

    Equal bytes are equal attributes, so an equal trail is a steady batch; unequal bytes
    (a value that only changed type, a resource's pid) only send the batch the slower way,
    where the memory's own rule decides. A steady batch's `series` is the last one's:
    `EndedSeries.closes` then takes it without looking at the batch (`steady.Shape.took_from`)."""

    __slots__ = ("series",)

    def __init__(self) -> None:
        self.series: list[Any] = []
