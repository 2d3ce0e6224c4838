"""Renders `docs/kubelet_stats.md` from the catalog:
`python -m otelgpu.receivers.kubelet_stats.docs > docs/kubelet_stats.md`.

A unit test compares the committed file with this output, so the docs cannot drift.
"""

from __future__ import annotations

import sys

from otelgpu.pdata import semconv
from otelgpu.pdata.model import MetricKind
from otelgpu.receivers.kubelet_stats.metrics import (
    CATALOGS,
    K8S_PVC_NAME,
    K8S_VOLUME_NAME,
    Group,
    MetricSpec,
    Naming,
)

_HEADER = """\
# Kubelet metrics

Every metric the `kubelet_stats` receiver can emit, read from the kubelet's `/stats/summary`.
This file is generated from `otelgpu/receivers/kubelet_stats/metrics.py`
(`python -m otelgpu.receivers.kubelet_stats.docs > docs/kubelet_stats.md`); a test fails when
they disagree.

## Names

`metric_names` chooses whose names and types the metrics have:

- `semconv` (the default): the OpenTelemetry semantic conventions (k8s and container
  metrics, still in development there) where they differ from the Collector's `kubeletstats`
  receiver: page faults are one counter per entity, `*.memory.paging.faults`, with
  `system.paging.fault.type` `major` (the summary's `majorPageFaults`) and `minor`
  (`pageFaults`, which counts every fault, less the major ones); volumes are
  `k8s.pod.volume.*`, with `k8s.pod.volume.usage` added; filesystem and volume sizes are
  UpDownCounters (non-monotonic sums; Prometheus shows them as gauges). Every other metric has
  the name, instrument and unit the `kubeletstats` receiver gives it, which is also the
  conventions' where they define the metric.
- `contrib`: the `kubeletstats` receiver's names and types throughout: page faults as two
  gauges (`*.memory.page_faults`, every fault, and `*.memory.major_page_faults`), volumes as
  `k8s.volume.*` gauges (no `usage`), filesystem sizes as gauges. Units stay annotated
  (`{fault}`, `{inode}`) where that receiver says `1`.

What neither follows: `k8s.volume.name` is a resource attribute (with
`k8s.persistentvolumeclaim.name` for a claim), not a point attribute, and `k8s.volume.type`
is not set (the summary does not carry it).

## Beside cAdvisor

Translated to Prometheus names, two container metrics have the names of cAdvisor's own series
(the kubelet's `/metrics/cadvisor`), under both `metric_names` and both exporter namings:
`container.memory.working_set` is `container_memory_working_set_bytes` and
`container.memory.usage` is `container_memory_usage_bytes`. No other name here is one of
cAdvisor's: its `container_cpu_usage_seconds_total`, `container_memory_rss`,
`container_fs_*` and `container_network_*` are `container_cpu_time_seconds_total`,
`container_memory_rss_bytes` and `container_filesystem_*` here, and network is reported per
pod (`k8s_pod_network_*`). The names are kept: they are the semantic conventions' and the
`kubeletstats` receiver's, and dashboards built on either use them.

cAdvisor's series carry `container`, `id`, `image`, `name`, `namespace` and `pod`. With the
Prometheus exporter's `naming: dcgm` ours carry `container`, `namespace` and `pod` too (with
`naming: otel`, `k8s_container_name`, `k8s_namespace_name` and `k8s_pod_name`), so where
Prometheus scrapes both, a query that names neither the job nor a label only one of them
has adds both: `sum(container_memory_working_set_bytes)` counts the node's working set more
than once, and under `naming: dcgm` so does every `sum by (namespace, pod)`. Every series of
ours carries `k8s_node_name` (in both namings; cAdvisor's do not, unless a relabelling in the
scrape config adds that label), so it tells them apart whatever the jobs are called. These
queries are run against a real Prometheus scraping both in the tests:

```promql
# The agent's:
sum(container_memory_working_set_bytes{k8s_node_name!=""})
sum by (namespace, pod) (container_memory_usage_bytes{k8s_node_name!=""})
# cAdvisor's:
sum(container_memory_working_set_bytes{k8s_node_name=""})
sum by (namespace, pod) (container_memory_usage_bytes{k8s_node_name=""})
```

The `by (namespace, pod)` lines are for `naming: dcgm`; with `naming: otel` ours are
`by (k8s_namespace_name, k8s_pod_name)`. Pinning the job (`{job="kubelet"}`) works as well
where every query names it. A series of ours lacks `k8s_node_name` only when the kubelet's
summary has no node name (counted as `no_node_name` in `otelgpu_kubelet_gaps_total`).

To give the series other names instead, send `kubelet_stats` to a Prometheus exporter of its
own with `namespace` set: every name it serves gets that prefix
(`namespace: kubelet` serves `kubelet_container_memory_working_set_bytes`), and dashboards
written for the conventions' names no longer find them.

## Groups and switches

`metric_groups` picks the groups (default `node`, `pod`, `container`);
`metrics: {NAME: {enabled: false}}` switches one off, by its name under the chosen
`metric_names`. Counters (`cpu.time`, `network.io`, `network.errors`, page faults under
`semconv`) are cumulative, starting at the entity's `startTime`. The pod's filesystem is its
ephemeral storage (`ephemeral-storage`); a container's is its writable layer (`rootfs`). The
kubelet's system containers (`node.systemContainers`) are not reported.

## Pods the summary misses

The summary lists a pod only when cAdvisor has stats for its containers; when it has none, the
pod is left out without a word, and "why has this GPU pod no container CPU series?" has no
answer in the summary itself. Where `k8s_attributes` runs in the same agent, every pod the
kubelet's pod-resources API lists (with a GPU or without) is checked against each read:
`otelgpu_kubelet_missed_pods_total{receiver,reason}` counts, per read, the listed pods the
summary has no entry for (`not_in_summary`) and those it names without any stats
(`no_stats_yet`), and the log names each pod once. Pods created or deleted during a read are
not counted. Without a pod-resources listing (no `k8s_attributes`, its source down) nothing is
counted. The receiver's README, "Pods the summary misses", has the details.

"""

_RESOURCE = f"""
## Resource attributes

| Group | Attributes |
|---|---|
| node | `{semconv.K8S_NODE_NAME}`, `{semconv.HOST_NAME}` (both the summary's `nodeName`) |
| pod | the node's, plus `{semconv.K8S_NAMESPACE_NAME}`, `{semconv.K8S_POD_NAME}`, `{semconv.K8S_POD_UID}` |
| container | the pod's, plus `{semconv.K8S_CONTAINER_NAME}` |
| volume | the pod's, plus `{K8S_VOLUME_NAME}` and, for a claim, `{K8S_PVC_NAME}` |

`{semconv.HOST_NAME}` is the node name GPU series carry too (the nvml receiver's, from
`K8S_NODE_NAME`), so node-level joins of GPU and kubelet series have one label in both namings:
`on (host_name)` (or `on (k8s_node_name)` where `k8s_attributes` labels the GPU series) in
`otel` naming, `on (Hostname)` in `dcgm` naming.

Pod and container resources carry the same keys `container_env` matches GPU series on, so
its business labels (`container.env.*`, `k8s.pod.label.*`, ...) land on these series too.
"""  # noqa: E501


def _row(spec: MetricSpec) -> str:
    kind = "counter" if spec.monotonic else spec.kind.value
    if spec.kind is MetricKind.SUM and not spec.monotonic:
        kind = "updowncounter"
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


def _table(naming: Naming) -> str:
    catalog = CATALOGS[naming]
    lines = [
        f"## `metric_names: {naming.value}`",
        "",
        "| Group | Name | Unit | Type | Attributes | Enabled | Summary field | Description |",
        "|---|---|---|---|---|---|---|---|",
        *(_row(spec) for group in Group for spec in catalog if spec.group is group),
    ]
    return "\n".join(lines) + "\n"


def render_markdown() -> str:
    """The whole of docs/kubelet_stats.md."""
    return _HEADER + _table(Naming.SEMCONV) + "\n" + _table(Naming.CONTRIB) + _RESOURCE


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
