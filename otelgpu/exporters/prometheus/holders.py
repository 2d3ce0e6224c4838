"""`shared_gpu_series: per_holder`: dcgm-exporter's `--kubernetes-virtual-gpus` shape of a
shared GPU's series, with the rule of its 4.8 releases (transformation/process_metrics.go).

The holders of a shared GPU are its allocation series (`nvidia.gpu.allocation`, from
k8s_attributes, `nvidia.gpu.shared` true). For such a GPU:

- utilization (`hw.gpu.utilization{hw.gpu.task=general}`, dcgm's `DCGM_FI_DEV_GPU_UTIL`) and
  memory used (`hw.gpu.memory.usage`, `DCGM_FI_DEV_FB_USED`) keep their device-level series
  (the GPU's labels, no holder), and each holder gets a series of its own whose value is the
  sum of its pod's processes' readings on that GPU (`nvidia.gpu.process.utilization`
  `{hw.gpu.task=general}`, `nvidia.gpu.process.memory.usage`; a process is its pod's by the
  pod labels container_env gives it), 0 for a holder whose pod runs nothing there;
- every other metric is copied once per holder, with the holder's labels and replica ID
  (`vgpu`), and has no device-level series: a sum over the copies counts the GPU once per
  holder (dcgm-exporter's copies double count the same way).

A batch with no per-process reading of the GPU for one of them (nothing runs on it, or the
nvml receiver's `processes` or that per-process metric is off) cannot say what each holder
uses of it: the GPU then has its device-level series and no holder's own, rather than a 0 per
holder that would claim to know. dcgm-exporter sums whole percents and whole MiB per
process; here the readings are summed first and the sum is rounded once, so a holder's value
may differ from its by less than one unit per process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple

from otelgpu.pdata import semconv
from otelgpu.pdata.model import Attributes, AttrValue, Batch, Metric, ResourceMetrics

AttrItems = tuple[tuple[str, AttrValue], ...]
Pod = tuple[AttrValue, AttrValue]  # (namespace, pod name)
_TASK = "hw.gpu.task"


class OwnReading(NamedTuple):
    """A device metric whose points a holder has its own share of (the points whose
    `hw.gpu.task` is `task`, or all when it is ""), and the per-process metric it sums."""

    device_metric: str
    process_metric: str
    task: str = ""

    def selects(self, attributes: Attributes) -> bool:
        return not self.task or attributes.get(_TASK) == self.task


# dcgm-exporter's per-process fields: DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED.
OWN_READINGS: tuple[OwnReading, ...] = (
    OwnReading("hw.gpu.utilization", "nvidia.gpu.process.utilization", "general"),
    OwnReading("hw.gpu.memory.usage", "nvidia.gpu.process.memory.usage"),
)
_BY_DEVICE_METRIC = {r.device_metric: r for r in OWN_READINGS}
_BY_PROCESS_METRIC = {r.process_metric: r for r in OWN_READINGS}

Write = tuple[AttrItems, bool, tuple[Metric, ...]]  # labels, whether info, metrics
# per device metric the processes were read for: per pod, the sum of its processes' readings
Sums = dict[str, dict[Pod, float]]


def is_allocation(rm: ResourceMetrics) -> bool:
    return any(m.name == semconv.GPU_ALLOCATION for m in rm.metrics)


def holders_by_device(batch: Batch) -> dict[object, list[ResourceMetrics]]:
    """The holders of each shared GPU in `batch`, from its allocation series."""
    found: dict[object, list[ResourceMetrics]] = {}
    for rm in batch:
        if is_allocation(rm) and rm.resource.get(semconv.GPU_SHARED) is True:
            found.setdefault(rm.resource.get(semconv.HW_ID), []).append(rm)
    return found


def process_sums(batch: Batch, devices: Mapping[object, object]) -> dict[object, Sums]:
    """Per shared GPU (`devices`) with per-process readings in `batch`: per `OWN_READINGS`
    metric its processes were read for, per pod, the sum of its processes' readings."""
    found: dict[object, Sums] = {}
    for rm in batch:
        resource = rm.resource
        if semconv.PROCESS_PID not in resource:
            continue
        device = resource.get(semconv.HW_ID)
        if device not in devices:
            continue
        pod = _pod(resource)
        for metric in rm.metrics:
            own = _BY_PROCESS_METRIC.get(metric.name)
            if own is None:
                continue
            by_pod = found.setdefault(device, {}).setdefault(own.device_metric, {})
            if pod is None:
                continue  # a reading of no pod: the GPU was read, no holder gets it
            for point in metric.points:
                value = point.value
                if own.selects(point.attributes) and isinstance(value, int | float):
                    by_pod[pod] = by_pod.get(pod, 0.0) + value
    return found


_CLAIM = (semconv.GPU_RESOURCECLAIM_NAME, semconv.GPU_RESOURCECLAIM_NAMESPACE)


def exclusive_claims(batch: Batch) -> dict[object, dict[str, AttrValue]]:
    """Per device one holder has whole through a DRA claim: that claim's name and namespace,
    from its allocation series (`dcgm_labels.dra`: dcgm-exporter's `--kubernetes-enable-dra`
    labels its series with them). A shared device has none: its series name no holder in
    `device` mode, and `per_holder` copies take the claim from each holder already."""
    found: dict[object, dict[str, AttrValue]] = {}
    for rm in batch:
        resource = rm.resource
        if not is_allocation(rm) or resource.get(semconv.GPU_SHARED) is True:
            continue
        claim = {k: resource[k] for k in _CLAIM if resource.get(k)}
        if claim:
            found[resource.get(semconv.HW_ID)] = claim
    return found


def holder_writes(
    device: ResourceMetrics, holders: list[ResourceMetrics], sums: Sums | None
) -> list[Write]:
    """What a shared GPU's resource writes in `per_holder` (module doc): its device-level
    own-reading points, and per holder a copy of everything else plus its own readings of
    each metric its processes were read for (`sums`)."""
    own: list[Metric] = []
    rest: list[Metric] = []
    for metric in device.metrics:
        reading = _BY_DEVICE_METRIC.get(metric.name)
        if reading is None:
            rest.append(metric)
            continue
        mine = tuple(p for p in metric.points if reading.selects(p.attributes))
        if mine:
            own.append(dataclasses.replace(metric, points=mine))
        others = tuple(p for p in metric.points if not reading.selects(p.attributes))
        if others:
            rest.append(dataclasses.replace(metric, points=others))
    writes: list[Write] = []
    if own:
        writes.append((tuple(device.resource.items()), True, tuple(own)))
    read = [(m, sums[m.name]) for m in own if m.name in sums] if sums else []
    for holder in holders:
        pod = _pod(holder.resource)
        shares = tuple(_holder_share(m, by_pod.get(pod, 0) if pod else 0) for m, by_pod in read)
        writes.append((holder_copy(device.resource, holder), True, (*rest, *shares)))
    return writes


def holder_copy(device: Attributes, holder: ResourceMetrics) -> AttrItems:
    """A shared GPU's resource as one holder's copy: the holder's labels and replica added."""
    extra = {k: v for k, v in holder.resource.items() if k not in device}
    return tuple({**device, **extra}.items())


def _holder_share(metric: Metric, value: float) -> Metric:
    """`metric`'s own-reading points with a holder's sum as their value."""
    points = tuple(dataclasses.replace(p, value=value) for p in metric.points)
    return dataclasses.replace(metric, points=points)


def _pod(resource: Attributes) -> Pod | None:
    namespace = resource.get(semconv.K8S_NAMESPACE_NAME)
    pod = resource.get(semconv.K8S_POD_NAME)
    return (namespace, pod) if namespace and pod else None
