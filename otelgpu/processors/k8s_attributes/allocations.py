"""The `nvidia.gpu.allocation` series: one resource per holder of a device, whose value is
that holder's share, so sums over pods or teams equal the device's total.

`AllocationSeries` keeps each device's series built (rebuilt only when its allocation or its
resource changed) and knows which devices have series out, so that the last holder leaving a
device empties its series at once (`gone`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import (
    Attributes,
    Identity,
    Metric,
    MetricKind,
    NumberDataPoint,
    ResourceMetrics,
)
from otelgpu.processors.k8s_attributes.snapshot import DEVICE_PLUGIN, Allocation

_ALLOCATIONS_MAX = 4096  # allocation series kept built (bounds memory if devices churn)
ALLOCATION_DESCRIPTION = (
    "The share of a GPU or MIG instance allocated to one container (1/N when N containers "
    "share it); join it with a device metric on hw.id to split that metric by pod"
)


@dataclass(frozen=True, slots=True)
class _Built:
    """One device's allocation series as built: from `allocation` and the device's resource
    `device` (the very objects: a new snapshot's allocation, or a new resource from the
    receiver, is a rebuild), one resource, share and set of point attributes per holder.
    What changes without either changing (since when each holder is listed, when the kubelet
    last answered) is not built in: each call notes what it is given."""

    allocation: Allocation
    device: Attributes
    resources: tuple[Attributes, ...]
    shares: tuple[float, ...]
    points: tuple[Attributes, ...]

    def of(self, allocation: Allocation, device: Attributes) -> bool:
        """Whether this was built from `allocation` on `device`."""
        return self.allocation is allocation and self.device is device


class AllocationSeries:
    """The allocation series of every device that has holders."""

    def __init__(self) -> None:
        # the allocation series' identity → what it was last built from, and its parts
        self._built: dict[Identity, _Built] = {}

    def series(
        self,
        rm: ResourceMetrics,
        found: Allocation,
        since: tuple[float, ...],
        confirmed: float,
        *,
        changed: tuple[float, ...] = (),
    ) -> list[ResourceMetrics]:
        """One `nvidia.gpu.allocation` resource per holder of the device (their attributes
        rebuilt only when the allocation or the device's resource changed), each with the
        notes of since when its holder is listed, when the kubelet last answered and since
        when it lists the holder's pod as it does now (`notes.HOLDER_SINCE`,
        `HOLDERS_CONFIRMED`, `HOLDERS_CHANGED`; `since` and `changed` are per holder, -inf
        for each when they do not have one per holder).

        Each point names its device and holder itself (`hw.id`, `hw.type`, namespace, pod,
        container) besides its resource: a backend that keeps only point attributes
        (Prometheus' OTLP endpoint by default) still has one series per holder of each device,
        as the receiver's GPU points carry their `hw.id`."""
        device = rm.identity if rm.identity is not None else rm.resource.get(semconv.HW_ID)
        identity = (semconv.GPU_ALLOCATION, device)
        built = self._built.get(identity)
        if built is None or not built.of(found, rm.resource):
            built = _build(found, rm.resource)
            if len(self._built) >= _ALLOCATIONS_MAX:
                self._built.clear()
            self._built[identity] = built
        when = _first_time(rm)
        never = (float("-inf"),) * len(built.resources)
        held_since = since if len(since) == len(built.resources) else never
        listed = changed if len(changed) == len(built.resources) else never
        return [
            ResourceMetrics(
                resource=resource,
                metrics=(allocation_metric(share, when, attributes=attributes),),
                scope=rm.scope,
                scope_version=rm.scope_version,
                identity=identity,
                notes={
                    notes.HOLDER_SINCE: held,
                    notes.HOLDERS_CONFIRMED: confirmed,
                    notes.HOLDERS_CHANGED: pod_listed,
                },
            )
            for resource, share, attributes, held, pod_listed in zip(
                built.resources, built.shares, built.points, held_since, listed, strict=True
            )
        ]

    def gone(self, rm: ResourceMetrics) -> ResourceMetrics | None:
        """The marker that empties a device's allocation series, once, when its last holder
        left (see `ResourceMetrics`: an identity with no metrics)."""
        device = rm.identity if rm.identity is not None else rm.resource.get(semconv.HW_ID)
        identity = (semconv.GPU_ALLOCATION, device)
        if identity not in self._built:
            return None
        del self._built[identity]
        return ResourceMetrics(
            resource=rm.resource,
            metrics=(),
            scope=rm.scope,
            scope_version=rm.scope_version,
            identity=identity,
        )


def _build(found: Allocation, device: Attributes) -> _Built:
    resources = tuple({**device, **labels} for labels, _ in found.holders)
    shares = tuple(share for _, share in found.holders)
    sources = found.sources or (DEVICE_PLUGIN,) * len(shares)
    points = tuple(
        _point_identity(resource, source)
        for resource, source in zip(resources, sources, strict=True)
    )
    return _Built(found, device, resources, shares, points)


def allocation_metric(
    share: float,
    time_unix_nano: int,
    source: str = DEVICE_PLUGIN,
    *,
    attributes: Attributes | None = None,
) -> Metric:
    """The `nvidia.gpu.allocation` metric of one holder; `source` is the allocation path
    (`attributes`, when given, are the whole point attributes and say it themselves)."""
    point = NumberDataPoint(
        attributes={semconv.GPU_ALLOCATION_SOURCE: source} if attributes is None else attributes,
        time_unix_nano=time_unix_nano,
        value=share,
    )
    return Metric(
        name=semconv.GPU_ALLOCATION,
        unit="1",
        description=ALLOCATION_DESCRIPTION,
        kind=MetricKind.GAUGE,
        points=(point,),
    )


# What an allocation point says of itself: its device and its holder.
_POINT_KEYS = (
    semconv.HW_ID,
    semconv.HW_TYPE,
    semconv.K8S_NAMESPACE_NAME,
    semconv.K8S_POD_NAME,
    semconv.K8S_CONTAINER_NAME,
)


def _point_identity(resource: Attributes, source: str) -> Attributes:
    """One holder's allocation point attributes: its path, device and holder names."""
    found = {key: resource[key] for key in _POINT_KEYS if key in resource}
    return {semconv.GPU_ALLOCATION_SOURCE: source, **found}


def _first_time(rm: ResourceMetrics) -> int:
    for metric in rm.metrics:
        for point in metric.points:
            return point.time_unix_nano
    return time.time_ns()
