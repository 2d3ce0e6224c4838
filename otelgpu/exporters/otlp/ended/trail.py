"""What a batch sends, written down by the encoder as it writes the batch (`Trail`), so that a
steady batch costs the memory one comparison of two lists in C."""

from __future__ import annotations

from typing import Any


class Trail:
    """A batch as the memory tells batches apart, filled by `encode.encode_bytes` from what it
    has at hand as it writes the batch:

    - `series`: per metric, each point's encoded attributes (the bytes sent, before the
      resource's pid: the cache's one object per attribute set), then its descriptor (name,
      description, unit, kind, monotonic: the cache's tuple, one object per descriptor);
      after a resource's metrics, its identity, scope (as encoded), schema URL and metric
      count. Attributes are bytes and descriptors tuples, so the list parses one way only
      (from its end: a resource's metric count, then each metric's descriptor, its points
      before it): two equal lists are two batches that send the same series from the same
      resources in the same order. Compared element by element, by identity first, what the
      cache shares from one batch to the next costs no comparison of its contents. Equal bytes
      are equal attributes; unequal bytes (a value that only changed type) only send the
      batch the slower way, where the memory's own rule decides;
    - `resources`: each resource's attributes, in order (what its closing points would be sent
      under);
    - `times`: each metric's last point's time, in order (None: the metric has no points).

    A steady batch's `series` is the last one's: `EndedSeries.closes` then takes it without
    looking at the batch (`steady.Shape.took_from`)."""

    __slots__ = ("resources", "series", "times")

    def __init__(self) -> None:
        self.series: list[Any] = []
        self.resources: list[Any] = []
        self.times: list[int | None] = []
