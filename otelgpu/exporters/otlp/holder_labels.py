"""A holder's business labels on its `nvidia.gpu.allocation` points.

The allocation series is the one that bills: one per holder of a device, valued at its share.
Its points name the device and the holder (`hw.id`, namespace, pod, container), but the
holder's business labels (what `container_env`'s include lists added: `container.env.*`,
`container.label.*`, `k8s.pod.label.*`, `k8s.pod.annotation.*`) are resource attributes, and
a backend that keeps only point attributes as labels (Prometheus' OTLP endpoint by default)
leaves them on `target_info`, where a per-team sum cannot reach them without promoting every
resource attribute. So each allocation point also carries them (its own attributes win), and
the DRA claim the holder got the device through (`nvidia.gpu.resourceclaim.*`), as the
prometheus exporter's allocation series do.

Applied to the batch before anything else: the ended-series memory compares these points
with them, so a holder whose labels changed (a pod recreated under the same name for another
team) has its old series closed at once. A device's readings are left alone: they join the
allocation series on `hw.id`. Workload owners (`k8s.deployment.name`, ...) are not business
labels: they stay on the resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, ResourceMetrics

BUSINESS_PREFIXES = (
    semconv.CONTAINER_ENV_PREFIX,
    semconv.CONTAINER_LABEL_PREFIX,
    semconv.POD_LABEL_PREFIX,
    semconv.POD_ANNOTATION_PREFIX,
)
HOLDER_KEYS = frozenset({semconv.GPU_RESOURCECLAIM_NAME, semconv.GPU_RESOURCECLAIM_NAMESPACE})
_MERGED_MAX = 4096  # merged attribute sets kept (one per holder; bounds memory if pods churn)


class HolderLabels:
    """Adds the holder's business labels to allocation points, reusing the merged attribute
    mapping while the point's attributes and the labels stay the same (so the memory of
    what was sent compares them by identity, as the other points)."""

    def __init__(self) -> None:
        # id of a point's attribute mapping → (that mapping, the labels, the merged mapping)
        self._merged: dict[int, tuple[Mapping[str, Any], tuple[Any, ...], Mapping[str, Any]]] = {}

    def apply(self, batch: Batch) -> Batch:
        """`batch` with its allocation points labelled (the same tuple when none is)."""
        out: list[ResourceMetrics] | None = None
        for index, rm in enumerate(batch):
            metrics = rm.metrics
            if len(metrics) != 1 or metrics[0].name != semconv.GPU_ALLOCATION:
                continue
            labels = tuple(
                (key, value)
                for key, value in rm.resource.items()
                if key.startswith(BUSINESS_PREFIXES) or key in HOLDER_KEYS
            )
            if not labels:
                continue
            if out is None:
                out = list(batch)
            metric = metrics[0]
            points = tuple(
                replace(point, attributes=self._with(point.attributes, labels))
                for point in metric.points
            )
            out[index] = replace(rm, metrics=(replace(metric, points=points),))
        return batch if out is None else tuple(out)

    def _with(self, attributes: Mapping[str, Any], labels: tuple[Any, ...]) -> Mapping[str, Any]:
        found = self._merged.get(id(attributes))
        if found is not None and found[0] is attributes and found[1] == labels:
            return found[2]
        merged = {**attributes, **{k: v for k, v in labels if k not in attributes}}
        if len(self._merged) >= _MERGED_MAX:
            self._merged.clear()
        self._merged[id(attributes)] = (attributes, labels, merged)
        return merged
