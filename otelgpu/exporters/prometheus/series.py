"""The latest value of every series, grouped in metric families, with expiry.

A series is keyed by its whole line prefix (`name{labels} `), so two data points that render to
the same name and labels are one series (the later value wins): the body never holds a
duplicate series, whatever attribute collisions the translation had to resolve. Values are
stored already formatted (`value\n`), so a family's body is one flat join of its prefixes and
values. When a series was last updated is not stored per series: each series keeps the number
of the batch that last wrote it, and the store the time of each batch.

Every change to which identity owns which line (a claim, a line removed, a family dropped)
counts one more in the store's `Layout`: a replayed write (`replay.py`) trusts a plan's
ownership only while that count is the one it last checked it at.

Each series also belongs to the identity of the resource that wrote it (`ResourceMetrics.identity`:
a GPU, a process). An identity's series in a family are replaced as a set on every batch that
reports it: a line it wrote last time and not this time (the GPU's pod changed, a holder left a
shared GPU) leaves the body at once. An identity reported with no metrics at all (see
`ResourceMetrics`) keeps only the lines the same batch wrote for it, in every family. Expiry only
removes identities that stopped reporting without saying so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from otelgpu.pdata.model import Attributes


class Layout:
    """How many times line ownership changed in a store (see the module doc)."""

    __slots__ = ("version",)

    def __init__(self) -> None:
        self.version = 0


@dataclass(slots=True)
class Family:
    """One metric family: name, Prometheus type, help text, and its series."""

    name: str
    type: str  # "gauge" | "counter"
    help: str
    # line prefix `name{labels} ` → `value\n`
    series: dict[str, str] = field(default_factory=dict)
    # Identities are numbered by the store (`SeriesStore.key`), so the bookkeeping below hashes
    # and compares small ints, whatever shape a receiver's identity has.
    # line prefix → the identity that last wrote it, and the batch that last wrote it
    owners: dict[str, int] = field(default_factory=dict)
    stamps: dict[str, int] = field(default_factory=dict)
    # identity → the prefixes it wrote; the identities the batch being ingested reported
    groups: dict[int, list[str]] = field(default_factory=dict)
    touched: dict[int, None] = field(default_factory=dict)
    layout: Layout = field(default_factory=Layout)  # the store's (shared by its families)

    def write(self, key: int, prefix: str, value: str, batch: int) -> None:
        """Stores one series' latest value on behalf of identity `key`, in batch `batch`."""
        self.series[prefix] = value
        self.stamps[prefix] = batch
        if self.owners.get(prefix) != key:
            self.claim(key, prefix)

    def claim(self, key: int, prefix: str) -> None:
        """Makes `prefix` one of identity `key`'s lines (it wrote it for the first time)."""
        self.layout.version += 1
        self.owners[prefix] = key
        group = self.groups.get(key)
        if group is None:
            self.groups[key] = [prefix]
        else:
            group.append(prefix)

    def settle(self, batch: int) -> int:
        """Removes the lines each identity reported in `batch` wrote before and not now; how
        many lines left."""
        removed = 0
        series, owners, stamps, groups = self.series, self.owners, self.stamps, self.groups
        for key in self.touched:
            prefixes = groups.get(key, ())
            for prefix in prefixes:
                if stamps.get(prefix) != batch:
                    break
            else:
                continue  # the usual case: it wrote exactly what it wrote before
            keep = []
            for prefix in prefixes:
                if owners.get(prefix) != key:
                    continue  # another identity wrote this line since: it is theirs now
                if stamps.get(prefix) == batch:
                    keep.append(prefix)
                else:
                    del series[prefix], owners[prefix], stamps[prefix]
                    removed += 1
            groups[key] = keep
        self.touched.clear()
        if removed:
            self.layout.version += 1
        return removed


class SeriesStore:
    """Families by name. Not thread-safe: the exporter's event loop owns it."""

    def __init__(self) -> None:
        self.families: dict[str, Family] = {}
        self.touched_families: dict[str, Family] = {}  # the families the batch wrote to
        self._keys: dict[Hashable, int] = {}
        self._retired: dict[Hashable, int] = {}
        self._next_key = 0
        self.batch = 0  # the number of the batch being ingested
        # batch number → the time it was ingested at (`expire` drops those past its cutoff:
        # no series can still be stamped with them)
        self.times: dict[int, float] = {}
        self.replaced = 0  # lines removed because their identity reported other lines
        self.layout = Layout()
        self._emptied: list[int] = []  # identities the batch said have no series now

    def key(self, identity: Hashable) -> int:
        """The number of a resource identity (stable while it keeps reporting)."""
        key = self._keys.get(identity)
        if key is None:
            key = self._retired.pop(identity, None)
            if key is None:
                key, self._next_key = self._next_key, self._next_key + 1
            self._keys[identity] = key
        return key

    def rotate(self) -> None:
        """Starts a new generation of identity numbers; an identity unseen for a whole
        generation is forgotten (its series have expired by then), so churn does not grow
        the table. Numbers are never reused."""
        self._retired, self._keys = self._keys, {}

    def family(self, name: str, type_: str, help_: str) -> Family | None:
        """The family `name`, created on first use; None when it exists with another type
        (two OTel metrics that translate to one name: the first one keeps it)."""
        found = self.families.get(name)
        if found is None:
            found = self.families[name] = Family(name, type_, help_, layout=self.layout)
        elif found.type != type_:
            return None
        self.touched_families[name] = found
        return found

    def begin(self, now: float) -> None:
        """Starts a batch ingested at `now` (the update time of every series it writes)."""
        self.times[self.batch] = now

    def empty(self, key: int) -> None:
        """Identity `key` has no series now: at `commit`, it keeps only the lines this batch
        wrote for it, in every family."""
        self._emptied.append(key)

    def commit(self) -> None:
        """Ends a batch: every identity it reported now holds exactly the lines it wrote."""
        if self._emptied:
            for name, family in self.families.items():
                for key in self._emptied:
                    if key in family.groups:
                        family.touched[key] = None
                        self.touched_families[name] = family
            self._emptied.clear()
        for name, family in self.touched_families.items():
            if family.touched:
                self.replaced += family.settle(self.batch)
            if not family.series and self.families.get(name) is family:
                del self.families[name]
                self.layout.version += 1
        self.touched_families.clear()
        self.batch += 1

    def expire(self, now: float, max_age: float) -> int:
        """Drops series not updated for `max_age` seconds (and emptied families); how many."""
        cutoff = now - max_age
        old = {batch for batch, updated in self.times.items() if updated < cutoff}
        dropped = 0
        for name in list(self.families):
            family = self.families[name]
            series, owners, stamps = family.series, family.owners, family.stamps
            stale = [key for key, batch in stamps.items() if batch in old] if old else []
            for key in stale:
                del series[key], stamps[key]
                owners.pop(key, None)
            if stale:
                dropped += len(stale)
                family.groups = {
                    identity: kept
                    for identity, prefixes in family.groups.items()
                    if (kept := [p for p in prefixes if owners.get(p) == identity])
                }
            if not series:
                del self.families[name]
        for batch in old:  # no series is stamped with it any more
            del self.times[batch]
        if dropped:
            self.layout.version += 1
        return dropped

    def series_count(self) -> int:
        """How many series the next body will hold (self-telemetry aside)."""
        return sum(len(f.series) for f in self.families.values())


def format_point(
    value: float,
    attributes: Attributes,
    scale: float = 1.0,
    convert: Callable[[float, Attributes], float] | None = None,
) -> str:
    """A point's sample text: its value times `scale`, then `convert`ed (dcgm naming's integer
    fields, the XID code), as `format_value` spells it. Raises TypeError, ValueError or
    OverflowError when the value is not a number."""
    if scale != 1.0:
        value = value * scale
    if convert is not None:
        value = convert(value, attributes)
    return format_value(value)


def format_value(value: float) -> str:
    """A sample value as the text format writes it (Go's spelling of NaN and infinities)."""
    if type(value) is int:
        return str(value)
    number = float(value)
    if math.isfinite(number):
        return repr(number)
    if math.isnan(number):
        return "NaN"
    return "+Inf" if number > 0 else "-Inf"
