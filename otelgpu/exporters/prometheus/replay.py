"""Replaying a resource's writes: the steady-state path of Prometheus ingest.

A receiver reports the same shape every cycle: the same resource attributes, the same metrics
in the same order, the same point attributes; only the values move. The first time a resource
is ingested, the general path (`general.py`: targets, label lines, families, claims) writes it
and records what it wrote as a `Plan`: per metric a step, with its descriptor and, per point,
the point's attributes and the line it went to. When the next batch brings the same resource,
the plan is replayed: each point's value is formatted and stored under the recorded line, with
no lookups, claims or label rendering.

A replay is only taken when it writes exactly what the general path would:
- the metrics, their names, kinds and units, point counts and point attributes equal the
  plan's, and every value is a number (anything else: the general path, which drops what it
  must);
- the identity still owns every line of the plan: the store counts the lines each identity
  loses (`series.Ledger`, kept by the families themselves), and while the count is the one the
  plan last saw, nothing was taken; otherwise each line is checked, and a line another identity
  wrote since, or one that expired, sends the resource to the general path, which claims it;
- `Settle` (below) runs the store's set replacement when the identity's resources differ from
  the ones it reported last time, so a holder that left a shared GPU still leaves at once.

Equivalence with the general path is what the tests check: random batch sequences ingested
with and without replay leave identical stores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from otelgpu.exporters.prometheus.series import Family, SeriesStore
from otelgpu.exporters.prometheus.targets import Samples
from otelgpu.exporters.prometheus.value_text import Target, sample_line, value_line
from otelgpu.pdata.model import Attributes, Metric, MetricKind

# What chose a metric's family: (name, unit, kind, monotonic). The description is its HELP,
# fixed when the family was made, so a new one changes nothing the general path would write.
Descriptor = tuple[str, str, MetricKind, bool]


# A metric of one point whose value is written as it is (the common case), as a plain tuple:
# its descriptor's four parts, the point's attributes, its line, its family's value and stamp
# maps (`Family.cells`) to write it in, and the family. A plain tuple, not a NamedTuple: the
# replay unpacks it once per point, and CPython unpacks an exact tuple in one step, a
# NamedTuple through an iterator, item by item. The other steps are not tuples, so
# `type(step) is tuple` tells a One apart.
One = tuple[str, str, MetricKind, bool, Attributes, str, dict[str, str], dict[str, int], Family]


@dataclass(frozen=True, slots=True)
class Several:
    """A metric of any number of points, or whose values `target` scales or converts."""

    descriptor: Descriptor
    family: Family
    attributes: tuple[Attributes, ...]
    lines: tuple[str, ...]
    target: Target
    values: dict[str, str]
    stamps: dict[str, int]


@dataclass(frozen=True, slots=True)
class Split:
    """A metric whose family depends on a point attribute (dcgm's split fields): the general
    path writes it on every replay too."""

    descriptor: Descriptor


Step = One | Several | Split
Line = tuple[Family, str]  # a line of a family: the device's info series
SplitPath = Callable[[Metric], int]  # the general path of one split metric: points stored


@dataclass(slots=True)
class Plan:
    """What the general path wrote for one resource of one identity."""

    identity: int
    steps: tuple[Step, ...]
    points: int  # how many points its One and Several steps write
    families: tuple[Family, ...]  # every family the plan writes to (for `Settle`)
    splits: bool  # whether a step is Split (the replay then needs the general path's)
    info: Line | None  # the device's info series, when the resource is a device
    used: int  # the batch that last wrote it (built or replayed)
    losses: int  # the identity's loss count when its lines were last known to be its own


class Written(NamedTuple):
    """What the general path wrote for one metric of a resource: its `samples` (None: the
    device's info series), the family (None: split, unreadable, or a family of another type)
    and the lines, in sample order."""

    samples: Samples | None
    family: Family | None
    lines: list[str]


class Recorder:
    """Records what the general path wrote for one resource (`record`), and makes it a Plan
    (`plan`), sharing equal descriptors between plans (every GPU's plan has the same ones)."""

    __slots__ = ("_descriptors", "info", "steps")

    def __init__(self, descriptors: dict[Descriptor, Descriptor]) -> None:
        self._descriptors = descriptors
        self.steps: list[Step] = []
        self.info: Line | None = None

    def record(self, written: list[Written]) -> bool:
        """Records the resource's writes; False when a point was not stored (no plan then)."""
        for samples, family, lines in written:
            if samples is None:
                if family is not None:
                    self.info = (family, lines[0])
                continue
            metric, target = samples.metric, samples.target
            if not samples.complete:
                return False
            descriptor = self._descriptor(metric)
            if target is None:
                self.steps.append(Split(descriptor))
                continue
            if family is None:
                return False
            points = metric.points
            values, stamps = family.cells
            if len(points) == 1 and target.plain:
                attributes = points[0].attributes
                name, unit, kind, monotonic = descriptor
                one = (name, unit, kind, monotonic, attributes, lines[0], values, stamps, family)
                self.steps.append(one)
            else:
                several = tuple(p.attributes for p in points)
                lines_ = tuple(lines)
                self.steps.append(
                    Several(descriptor, family, several, lines_, target, values, stamps)
                )
        return True

    def plan(self, identity: int, used: int, losses: int) -> Plan:
        """The plan of what was recorded."""
        steps = tuple(self.steps)
        families = {}
        points = 0
        for step in steps:
            if type(step) is tuple:
                family = step[8]  # see `One`
                families[id(family)] = family
                points += 1
            elif isinstance(step, Several):
                families[id(step.family)] = step.family
                points += len(step.lines)
        if self.info is not None:
            families[id(self.info[0])] = self.info[0]
        splits = any(isinstance(s, Split) for s in steps)
        return Plan(
            identity, steps, points, tuple(families.values()), splits, self.info, used, losses
        )

    def _descriptor(self, metric: Metric) -> Descriptor:
        key = _descriptor(metric)
        return self._descriptors.setdefault(key, key)


def replay(
    plan: Plan,
    metrics: tuple[Metric, ...],
    store: SeriesStore,
    settle: Settle,
    split_path: SplitPath | None,
) -> tuple[int, int] | None:
    """Writes `metrics` along `plan` and tells `settle`; (points stored, points), or None
    when the batch's shape or data differ from the plan's (the caller then takes the general
    path, which rewrites all of it: whatever this call wrote before it stopped is written
    again). It writes values in the lines' families' maps (`Family.cells`) only while the plan
    is current (the identity lost no line since it last checked): no line is added, no owner
    changes."""
    steps = plan.steps
    if len(metrics) != len(steps):
        return None
    identity, batch = plan.identity, store.batch
    losses = store.ledger.losses.get(identity, 0)
    if plan.losses != losses:  # it lost a line somewhere since: check each of its lines
        if not _owned(plan):
            return None  # taken over or expired since: the general path claims it back
        plan.losses = losses
    stored = total = plan.points
    if plan.info is not None:
        values, stamps = plan.info[0].cells
        line = plan.info[1]
        values[line] = "1\n"
        stamps[line] = batch
    for metric, step in zip(metrics, steps, strict=True):
        if type(step) is tuple:  # One, the common case, inlined: no call but the value's text
            name, unit, kind, monotonic, attrs, line, values, stamps, _ = step
            if (
                metric.name != name
                or metric.unit != unit
                or metric.kind is not kind
                or metric.monotonic is not monotonic
            ):
                return None
            try:
                (point,) = metric.points  # ValueError unless exactly one
                attributes = point.attributes
                if attributes is not attrs and attributes != attrs:
                    return None
                values[line] = value_line(point.value)
            except (TypeError, ValueError, OverflowError):  # not a number, or not one point
                return None
            stamps[line] = batch
        elif type(step) is Several:
            if _descriptor(metric) != step.descriptor or not _several(step, metric, batch):
                return None
        elif (
            type(step) is Split
            and _descriptor(metric) == step.descriptor
            and split_path is not None  # dcgm's split fields: the general path, every time
        ):
            total += len(metric.points)
            stored += split_path(metric)
        else:
            return None  # another metric, or a Split step without the general path to take it
    settle.reported(identity, plan, plan.used)
    plan.used = batch
    return stored, total


def _descriptor(metric: Metric) -> Descriptor:
    return (metric.name, metric.unit, metric.kind, metric.monotonic)


def _owned(plan: Plan) -> bool:
    """Whether the plan's identity still owns every line of it."""
    identity = plan.identity
    if plan.info is not None and not plan.info[0].owns(identity, plan.info[1]):
        return False
    for step in plan.steps:
        if type(step) is tuple:
            line, family = step[5], step[8]  # see `One`
            if not family.owns(identity, line):
                return False
        elif isinstance(step, Several):
            family = step.family
            if not all(family.owns(identity, line) for line in step.lines):
                return False
    return True


def _several(step: Several, metric: Metric, batch: int) -> bool:
    """A Several step; False where the general path must take over."""
    attrs, lines, target, values, stamps = (
        step.attributes,
        step.lines,
        step.target,
        step.values,
        step.stamps,
    )
    points = metric.points
    if len(points) != len(lines):
        return False
    plain = target.plain
    for point, expected, line in zip(points, attrs, lines, strict=True):
        attributes = point.attributes
        if attributes is not expected and attributes != expected:
            return False
        try:
            if plain:
                values[line] = value_line(point.value)
            else:
                values[line] = sample_line(point.value, attributes, target)
        except (TypeError, ValueError, OverflowError):  # not a number: the general path drops it
            return False
        stamps[line] = batch
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

    def finish(self, batch: int) -> None:
        """Marks what needs settling in the families (the store's commit settles them);
        remembers this batch's identities for the next one."""
        counts, last = self._counts, self._last
        for plan, before in self._replayed:
            identity = plan.identity
            if identity in self._general or last.get(identity) != (before, counts[identity]):
                for family in plan.families:
                    family.touch(identity)
        for identity, count in counts.items():
            last[identity] = (batch, count)
        self._replayed.clear()
        self._counts.clear()
        self._general.clear()

    def forget(self, keep: Callable[[int], bool]) -> None:
        """Drops what it knows of identities `keep` refuses (bounded like the plans)."""
        self._last = {i: seen for i, seen in self._last.items() if keep(i)}
