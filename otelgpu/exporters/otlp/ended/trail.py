"""What a batch sends, written down by the encoder as it writes the batch (`Trail`), so that a
steady batch costs the memory one comparison of two lists in C."""

from __future__ import annotations

from typing import Any


class Trail:
    """A batch as the memory tells batches apart, filled by `encode.encode_bytes` as it walks
    the batch (it reads every field named here anyway, in the same loops):

    - `series`: per metric, each point's attribute mapping, then the point count and the
      descriptor (name, description, unit, kind, monotonic: the encoder's cached tuple, one
      object per descriptor); after a resource's metrics, its identity, scope (as encoded),
      schema URL and metric count. Read from its end, the counts fix where each part begins,
      so two equal lists are two batches that send the same series from the same resources
      in the same order. Compared element by element, by identity first, the mappings a
      receiver or processor shares from one cycle to the next, and the cached descriptors,
      cost no comparison of their contents;
    - `resources`: each resource's attributes, in order (what its closing points would be sent
      under);
    - `times`: each metric's first point's time, in order (None: the metric has no points).

    A steady batch's `series` is the last one's: `EndedSeries.closes` then takes it without
    looking at the batch (`steady.Shape.took_from`)."""

    __slots__ = ("resources", "series", "times")

    def __init__(self) -> None:
        self.series: list[Any] = []
        self.resources: list[Any] = []
        self.times: list[int | None] = []
