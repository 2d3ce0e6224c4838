"""Replaying a resource's writes: the steady-state path of Prometheus ingest.

A receiver reports the same shape every cycle: the same resource attributes, the same metrics
in the same order, the same point attributes; only the values move. The first time a resource
is ingested, `Translator` takes the general path (targets, families, label lines, claims) and
records what it wrote as a `Plan`: per metric, its descriptor and, per point, the point's
attributes and the line prefix it went to. When the next batch brings the same resource, the
plan is replayed: each point's value is formatted and stored under the recorded prefix, with
no lookups, claims or label rendering.

A replay is only taken when it writes exactly what the general path would:
- the metrics, their names, kinds and units, point counts and point attributes equal the
  plan's, and
  every value is a number (anything else: the general path, which drops what it must);
- the identity still owns every line of the plan (a line another identity wrote since, or one
  that expired, needs a claim: the general path makes it);
- `Settle` (below) runs the store's set replacement when the identity's resources differ from
  the ones it reported last time, so a holder that left a shared GPU still leaves at once.

Equivalence with the general path is what the tests check: random batch sequences ingested
with and without replay leave identical stores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from otelgpu.exporters.prometheus.dcgm import Convert
from otelgpu.exporters.prometheus.series import Family, Layout, format_point
from otelgpu.pdata.model import Attributes, Metric, MetricKind, NumberDataPoint

# One metric of a plan: (form, descriptor, family, attributes, prefixes, scale, convert).
# The descriptor is (name, unit, kind, monotonic): what chose the family (the description is
# its HELP, fixed when the family was made, so a new one changes nothing the general path
# would write either).
ONE = 0  # one point, its value written as it is: `attributes` and `prefixes` are that point's
SEVERAL = 1  # any number of points, or scaled/converted values: a tuple of each, point order
SPLIT = 2  # the family depends on a point attribute (dcgm's split fields): the general path
Descriptor = tuple[str, str, MetricKind, bool]
# (family, attributes, prefixes) by form: ONE (Family, Attributes, str); SEVERAL (Family,
# tuple[Attributes, ...], tuple[str, ...]); SPLIT (None, (), ()). Typed Any: the form says which.
Step = tuple[int, Descriptor, Any, Any, Any, float, "Convert | None"]
Split = Callable[[Metric], int]  # the general path of one split metric: points stored


@dataclass(slots=True)
class Plan:
    """What the general path wrote for one resource of one identity."""

    identity: int
    steps: tuple[Step, ...]
    points: int  # how many points its ONE and SEVERAL steps write
    families: tuple[Family, ...]  # every family the plan writes to (for `Settle`)
    split: bool  # whether a step is SPLIT (the replay then needs the general path's `Split`)
    used: int  # the batch that last wrote it (built or replayed)
    layout: int  # the store's `Layout.version` when its lines were last known to be its own


def step(
    descriptors: dict[Descriptor, Descriptor],
    metric: Metric,
    family: Family | None,
    points: tuple[NumberDataPoint, ...],
    prefixes: list[str],
    scale: float,
    convert: Convert | None,
) -> Step:
    """The step of one metric the general path just wrote: to `family` (None: a split metric),
    its points under `prefixes`. `descriptors` shares equal descriptors between plans (every
    GPU's plan has the same ones)."""
    key = (metric.name, metric.unit, metric.kind, metric.monotonic)
    descriptor = descriptors.setdefault(key, key)
    if family is None:
        return (SPLIT, descriptor, None, (), (), 1.0, None)
    if len(points) == 1 and scale == 1.0 and convert is None:
        return (ONE, descriptor, family, points[0].attributes, prefixes[0], 1.0, None)
    attributes = tuple(p.attributes for p in points)
    return (SEVERAL, descriptor, family, attributes, tuple(prefixes), scale, convert)


def plan_of(identity: int, steps: tuple[Step, ...], used: int, layout: int) -> Plan:
    """A plan of the steps the general path just took for one resource."""
    families = {id(s[2]): s[2] for s in steps if s[2] is not None}
    points = sum(1 if s[0] == ONE else len(s[4]) for s in steps if s[0] != SPLIT)
    split = any(s[0] == SPLIT for s in steps)
    return Plan(identity, steps, points, tuple(families.values()), split, used, layout)


def replay(
    plan: Plan, metrics: tuple[Metric, ...], batch: int, layout: Layout, split: Split | None
) -> tuple[int, int] | None:
    """Writes `metrics` along `plan`; (points stored, points), or None when the batch's shape
    or data differ from the plan's (the caller then takes the general path, which rewrites all
    of it: whatever this call wrote before it stopped is written again)."""
    steps = plan.steps
    if len(metrics) != len(steps):
        return None
    identity = plan.identity
    # Ownership changed somewhere since this plan last checked: check each of its lines.
    check = plan.layout != layout.version
    stored = total = plan.points
    for metric, (form, descriptor, family, attrs, prefixes, scale, convert) in zip(
        metrics, steps, strict=True
    ):
        if (metric.name, metric.unit, metric.kind, metric.monotonic) != descriptor:
            return None
        if form == ONE:  # the common case, inlined: no loop, no call
            points = metric.points
            if len(points) != 1:
                return None
            point = points[0]
            attributes = point.attributes
            if attributes is not attrs and attributes != attrs:
                return None
            if check and family.owners.get(prefixes) != identity:
                return None  # taken over or expired since: the general path claims it back
            # `format_value`'s common cases inlined: an int, a finite float (repr is its text)
            value = point.value
            kind = value.__class__
            if kind is int or (kind is float and value - value == 0.0):
                family.series[prefixes] = repr(value) + "\n"
            elif not _write(family, prefixes, value, attributes, 1.0, None):
                return None
            family.stamps[prefixes] = batch
        elif form == SEVERAL:
            if not _several(
                identity, check, family, attrs, prefixes, scale, convert, metric, batch
            ):
                return None
        elif split is not None:
            total += len(metric.points)
            stored += split(metric)
        else:
            return None  # a SPLIT step without the general path to hand it to
    plan.layout = layout.version
    return stored, total


def _several(
    identity: int,
    check: bool,
    family: Family,
    attrs: tuple[Attributes, ...],
    prefixes: tuple[str, ...],
    scale: float,
    convert: Convert | None,
    metric: Metric,
    batch: int,
) -> bool:
    """A SEVERAL step; False where the general path must take over."""
    points = metric.points
    if len(points) != len(prefixes):
        return False
    owners, stamps, series = family.owners, family.stamps, family.series
    plain = scale == 1.0 and convert is None
    for point, expected, prefix in zip(points, attrs, prefixes, strict=True):
        attributes = point.attributes
        if attributes is not expected and attributes != expected:
            return False
        if check and owners.get(prefix) != identity:
            return False
        value = point.value
        kind = value.__class__
        if plain and (kind is int or (kind is float and value - value == 0.0)):
            series[prefix] = repr(value) + "\n"
        elif not _write(family, prefix, value, attributes, scale, convert):
            return False
        stamps[prefix] = batch
    return True


def _write(
    family: Family,
    prefix: str,
    value: float,
    attributes: Attributes,
    scale: float,
    convert: Convert | None,
) -> bool:
    """One value, formatted as the general path does; False when it is not a number (the
    general path then drops the metric)."""
    try:
        family.series[prefix] = format_point(value, attributes, scale, convert) + "\n"
    except (TypeError, ValueError, OverflowError):
        return False
    return True


class Settle:
    """Decides, per identity, whether its replayed resources need the store's set replacement.

    A replay writes the lines the identity wrote last time and marks nothing for settling, so it
    is only complete when the identity reports the same resources as the last time it reported:
    every one of them replayed, each last written in that same batch, as many as then. Any other
    case (a holder left, a resource changed shape, two resources with the same attributes)
    marks the replayed plans' families, and the store's commit removes what was not rewritten,
    exactly as after the general path.
    """

    def __init__(self) -> None:
        # identity → (the batch it last reported in, how many resources it reported)
        self._last: dict[int, tuple[int, int]] = {}
        self._replayed: list[tuple[Plan, int]] = []  # plan, the batch it was last used before
        self._counts: dict[int, int] = {}
        self._general: set[int] = set()

    def reported(self, identity: int, plan: Plan | None, before: int) -> None:
        """One resource of `identity` was ingested: replayed from `plan` (last used in
        `before`) or, with no plan, on the general path."""
        self._counts[identity] = self._counts.get(identity, 0) + 1
        if plan is None:
            self._general.add(identity)
        else:
            self._replayed.append((plan, before))

    def finish(self, batch: int, touched: dict[str, Family]) -> None:
        """Marks what needs settling (in the families and in the store's `touched`, the
        families its commit settles); remembers this batch's identities for the next one."""
        counts, last = self._counts, self._last
        for plan, before in self._replayed:
            identity = plan.identity
            if identity in self._general or last.get(identity) != (before, counts[identity]):
                for family in plan.families:
                    family.touched[identity] = None
                    touched[family.name] = family
        for identity, count in counts.items():
            last[identity] = (batch, count)
        self._replayed.clear()
        self._counts.clear()
        self._general.clear()

    def forget(self, keep: Callable[[int], bool]) -> None:
        """Drops what it knows of identities `keep` refuses (bounded like the plans)."""
        self._last = {i: seen for i, seen in self._last.items() if keep(i)}
