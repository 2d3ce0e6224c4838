"""The internal metrics model: small, immutable by contract and shaped like OTLP.

A batch is a tuple of `ResourceMetrics`; GPU metrics are naturally one resource per GPU (or
MIG instance, or GPU process). Processors return new batches built with `dataclasses.replace`,
so a batch handed to several exporters never needs copying.

The classes are slotted dataclasses that are *not* `frozen`: a frozen dataclass's `__init__`
sets each field through `object.__setattr__`, which made building the ~50k objects of a
10k-point cycle cost twice as much (about 1 µs instead of 0.5 µs each). Nothing may assign to a
field after construction: a batch is shared by every exporter of a pipeline (build a new object
with `dataclasses.replace` instead). Their attribute mappings make them unhashable either way.

Series identity: a receiver names what each resource *is* (`ResourceMetrics.identity`: a GPU's
UUID, a process on a GPU); attributes that processors add later are properties of that
resource, not part of its identity. Exporters key their series by identity, so when a
processor's labels change the old label set is replaced at once instead of lingering beside
the new one until it expires.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

AttrValue = str | int | float | bool
Attributes = Mapping[str, AttrValue]
Identity = Hashable


class MetricKind(Enum):
    """The OTLP data types the agent produces."""

    GAUGE = "gauge"
    SUM = "sum"

    # Members are singletons: hashing by identity is correct and skips Enum's Python-level
    # `__hash__` (exporters key their caches by kind once per metric of every batch).
    __hash__ = object.__hash__


@dataclass(slots=True, kw_only=True)
class NumberDataPoint:
    """One value at one time; cumulative sums carry the time their count started."""

    attributes: Attributes
    time_unix_nano: int
    value: int | float
    start_time_unix_nano: int = 0


@dataclass(slots=True, kw_only=True)
class Metric:
    """A named series family with its points (all of one resource)."""

    name: str
    unit: str
    description: str
    kind: MetricKind
    points: tuple[NumberDataPoint, ...]
    monotonic: bool = False


@dataclass(slots=True, kw_only=True)
class ResourceMetrics:
    """The metrics of one resource (a GPU, a MIG instance, a GPU process, the agent itself).

    `identity` is what the resource is, as its receiver knows it (None: its attributes as the
    receiver built them). Several resources may share one identity when together they make
    one set of series (the allocation series of a shared GPU, one per holder): an exporter
    replaces the whole set each time that identity reports.
    A resource with an identity and no metrics says that identity has no series now (a GPU
    process ended, a device's last holder left, a lost GPU's readings stopped): an exporter
    that keeps series drops every line of that identity the same batch did not write, and a
    push exporter sends nothing for it. Producers send it once, when the identity goes.
    `notes` carries facts one processor leaves for a later one in the same pipeline (see
    `otelgpu.pdata.notes`; None when there are none); exporters never send them, and read
    only the dcgm device set's (`notes.DCGM_LEFT_OUT`, `notes.DCGM_FROM_GPU`).
    """

    resource: Attributes
    metrics: tuple[Metric, ...]
    scope: str = "otelgpu"
    scope_version: str = ""
    identity: Identity | None = None
    notes: Mapping[str, object] | None = None
    schema_url: str = ""  # the semantic-conventions schema the names follow ("": none)


Batch = tuple[ResourceMetrics, ...]


def point_count(batch: Batch) -> int:
    """How many data points a batch holds: the unit every counter in the agent uses."""
    return sum(len(metric.points) for rm in batch for metric in rm.metrics)


def with_resource(
    rm: ResourceMetrics, extra: Attributes, *, override: bool = False
) -> ResourceMetrics:
    """Returns `rm` with `extra` merged into its resource attributes.

    Existing keys win unless `override` is set: enrichment never clobbers what the
    receiver (or an earlier processor) already knew.
    """
    if not extra:
        return rm
    merged = {**rm.resource, **extra} if override else {**extra, **rm.resource}
    return _rebuilt(rm, merged, rm.metrics)


def keep_metrics(rm: ResourceMetrics, metrics: Iterable[Metric]) -> ResourceMetrics:
    """Returns `rm` holding only `metrics` (used by filtering processors)."""
    return _rebuilt(rm, rm.resource, tuple(metrics))


def _rebuilt(
    rm: ResourceMetrics, resource: Attributes, metrics: tuple[Metric, ...]
) -> ResourceMetrics:
    """`rm` with a new resource and metrics, every other field carried over.

    Built field by field rather than with `dataclasses.replace`, which costs nearly three times
    as much (it walks the class's fields and their defaults on every call); these two run for
    every resource of every batch. A field added to `ResourceMetrics` must be added here: the
    test that gives every field a value of its own fails until it is.
    """
    return ResourceMetrics(
        resource=resource,
        metrics=metrics,
        scope=rm.scope,
        scope_version=rm.scope_version,
        identity=rm.identity,
        notes=rm.notes,
        schema_url=rm.schema_url,
    )
