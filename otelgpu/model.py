"""The internal metrics model: small, immutable and shaped like OTLP.

A batch is a tuple of `ResourceMetrics`; GPU metrics are naturally one resource per GPU (or
MIG instance, or GPU holder). Processors return new batches built with `dataclasses.replace`,
so a batch handed to several exporters never needs copying.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

AttrValue = str | int | float | bool
Attributes = Mapping[str, AttrValue]


class MetricKind(Enum):
    """The OTLP data types the agent produces."""

    GAUGE = "gauge"
    SUM = "sum"


@dataclass(frozen=True, slots=True, kw_only=True)
class NumberDataPoint:
    """One value at one time; cumulative sums carry the time their count started."""

    attributes: Attributes
    time_unix_nano: int
    value: int | float
    start_time_unix_nano: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """A named series family with its points (all of one resource)."""

    name: str
    unit: str
    description: str
    kind: MetricKind
    points: tuple[NumberDataPoint, ...]
    monotonic: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceMetrics:
    """The metrics of one resource (a GPU, a MIG instance, the agent itself)."""

    resource: Attributes
    metrics: tuple[Metric, ...]
    scope: str = "otelgpu"
    scope_version: str = ""


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
    return replace(rm, resource=merged)


def keep_metrics(rm: ResourceMetrics, metrics: Iterable[Metric]) -> ResourceMetrics:
    """Returns `rm` holding only `metrics` (used by filtering processors)."""
    return replace(rm, metrics=tuple(metrics))
