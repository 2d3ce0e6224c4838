"""Renders `docs/kubelet_stats.md` from the catalog:
`python -m otelgpu.receivers.kubelet_stats.docs > docs/kubelet_stats.md`.

A unit test compares the committed file with this output, so the docs cannot drift.
"""

from __future__ import annotations

import sys

from otelgpu.pdata import semconv
from otelgpu.receivers.kubelet_stats.metrics import (
    CATALOG,
    K8S_PVC_NAME,
    K8S_VOLUME_NAME,
    Group,
    MetricSpec,
)

_HEADER = """\
# Kubelet metrics

Every metric the `kubelet_stats` receiver can emit, read from the kubelet's `/stats/summary`.
This file is generated from `otelgpu/receivers/kubelet_stats/metrics.py`
(`python -m otelgpu.receivers.kubelet_stats.docs > docs/kubelet_stats.md`); a test fails when
they disagree.

Names follow the OpenTelemetry k8s and container semantic conventions, and the OpenTelemetry
Collector's `kubeletstats` receiver where the conventions say nothing. `metric_groups` picks the
groups (default `node`, `pod`, `container`); `metrics: {NAME: {enabled: false}}` switches one
off. Counters (`cpu.time`, `network.io`, `network.errors`, page faults) are cumulative, starting
at the entity's `startTime`. The pod's filesystem is its ephemeral storage
(`ephemeral-storage`); a container's is its writable layer (`rootfs`). The kubelet's system
containers (`node.systemContainers`) are not reported.

"""

_RESOURCE = f"""
## Resource attributes

| Group | Attributes |
|---|---|
| node | `{semconv.K8S_NODE_NAME}` |
| pod | `{semconv.K8S_NODE_NAME}`, `{semconv.K8S_NAMESPACE_NAME}`, `{semconv.K8S_POD_NAME}`, `{semconv.K8S_POD_UID}` |
| container | the pod's, plus `{semconv.K8S_CONTAINER_NAME}` |
| volume | the pod's, plus `{K8S_VOLUME_NAME}` and, for a claim, `{K8S_PVC_NAME}` |

Pod and container resources carry the same keys `container_env` matches GPU series on, so
its business labels (`container.env.*`, `k8s.pod.label.*`, ...) land on these series too.
"""  # noqa: E501


def _row(spec: MetricSpec) -> str:
    kind = "counter" if spec.monotonic else spec.kind.value
    cells = (
        spec.group.value,
        f"`{spec.name}`",
        f"`{spec.unit}`",
        kind,
        ", ".join(f"`{a}`" for a in spec.attributes),
        "yes" if spec.enabled else "no",
        f"`{spec.source}`",
        spec.description.replace("|", "\\|"),
    )
    return "| " + " | ".join(cells) + " |"


def render_markdown() -> str:
    """The whole of docs/kubelet_stats.md."""
    lines = [
        "| Group | Name | Unit | Type | Attributes | Enabled | Summary field | Description |",
        "|---|---|---|---|---|---|---|---|",
        *(_row(spec) for group in Group for spec in CATALOG if spec.group is group),
    ]
    return _HEADER + "\n".join(lines) + "\n" + _RESOURCE


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
