"""The kubelet_stats receiver's metric catalog: one table that drives reading, config and docs.

Names follow the OpenTelemetry k8s and container semantic conventions, and the Collector's
`kubeletstats` receiver where the conventions are silent, so dashboards built for either work.
Each `MetricSpec` says which summary block (`cpu`, `memory`, ...) and field it reads; the
summary reader (`summary.py`) is generic over this table and `docs/kubelet_stats.md` is
rendered from it (`python -m otelgpu.receivers.kubelet_stats.docs`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from otelgpu.pdata.model import MetricKind

# Attribute names this receiver adds beyond otelgpu/pdata/semconv.py (reported to the lead).
K8S_VOLUME_NAME = "k8s.volume.name"  # resource: the pod's volume name
K8S_PVC_NAME = "k8s.persistentvolumeclaim.name"  # resource: when the volume is a PVC
NETWORK_INTERFACE_NAME = "network.interface.name"  # datapoint: eth0, ...
DIRECTION = "network.io.direction"  # datapoint: receive | transmit (semantic conventions)

GAUGE = MetricKind.GAUGE
SUM = MetricKind.SUM
NANO = 1e-9


class Group(Enum):
    """The `metric_groups` a user picks: which kind of entity the series describe."""

    NODE = "node"
    POD = "pod"
    CONTAINER = "container"
    VOLUME = "volume"


# Where each group keeps its filesystem block in the summary: the node's root filesystem,
# the pod's ephemeral storage (as the Collector reads it), the container's writable layer.
FS_BLOCK = {Group.NODE: "fs", Group.POD: "ephemeral-storage", Group.CONTAINER: "rootfs"}
PREFIX = {Group.NODE: "k8s.node", Group.POD: "k8s.pod", Group.CONTAINER: "container"}


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric the receiver can emit.

    `block` is the summary object read ("" = the entry itself, as for volumes); `field` the
    number in it, multiplied by `scale`. With `per_interface`, `field` is the suffix after
    `rx`/`tx` and one point is emitted per interface and direction.
    """

    name: str
    unit: str
    kind: MetricKind
    monotonic: bool
    description: str
    group: Group
    block: str
    field: str
    scale: float = 1.0
    per_interface: bool = False
    enabled: bool = True

    @property
    def attributes(self) -> tuple[str, ...]:
        """Datapoint attribute keys."""
        return (NETWORK_INTERFACE_NAME, DIRECTION) if self.per_interface else ()

    @property
    def source(self) -> str:
        """The summary path read (`cpu.usageNanoCores`, `network.interfaces[].{rx,tx}Bytes`)."""
        if self.per_interface:
            return f"{self.block}.interfaces[].{{rx,tx}}{self.field}"
        return f"{self.block}.{self.field}" if self.block else self.field


_MEMORY = (
    (
        "available",
        "availableBytes",
        "Memory available: the limit (or node capacity) minus the working set.",
    ),
    ("usage", "usageBytes", "Total memory in use, page cache included."),
    ("rss", "rssBytes", "Anonymous and swap-cache memory (resident set)."),
    ("working_set", "workingSetBytes", "Working set memory: what the kubelet's eviction watches."),
)
_FS = (
    ("available", "availableBytes", "Bytes available on the filesystem."),
    ("capacity", "capacityBytes", "Total bytes of the filesystem."),
    ("usage", "usedBytes", "Bytes used."),
)
_VOLUME = (
    ("available", "By", "availableBytes", "Bytes available on the volume."),
    ("capacity", "By", "capacityBytes", "Total bytes of the volume."),
    ("inodes", "{inode}", "inodes", "Total inodes of the volume's filesystem."),
    ("inodes.free", "{inode}", "inodesFree", "Free inodes."),
    ("inodes.used", "{inode}", "inodesUsed", "Inodes used."),
)


def _entity_specs(group: Group) -> Iterator[MetricSpec]:
    prefix, who = PREFIX[group], group.value
    yield MetricSpec(
        f"{prefix}.cpu.time", "s", SUM, True, f"Total CPU time the {who} consumed.",
        group, "cpu", "usageCoreNanoSeconds", NANO,
    )  # fmt: skip
    yield MetricSpec(
        f"{prefix}.cpu.usage", "{cpu}", GAUGE, False,
        f"CPUs the {who} uses, averaged over the kubelet's sampling window.",
        group, "cpu", "usageNanoCores", NANO,
    )  # fmt: skip
    for suffix, field, description in _MEMORY:
        yield MetricSpec(
            f"{prefix}.memory.{suffix}", "By", GAUGE, False, description, group, "memory", field
        )
    for suffix, field, description in (
        ("page_faults", "pageFaults", "Page faults."),
        ("major_page_faults", "majorPageFaults", "Major page faults (read from disk)."),
    ):
        yield MetricSpec(
            f"{prefix}.memory.{suffix}", "{fault}", SUM, True, description, group, "memory", field
        )
    if group is not Group.CONTAINER:  # the kubelet reports network per pod (shared netns)
        yield MetricSpec(
            f"{prefix}.network.io", "By", SUM, True, "Bytes received and transmitted.",
            group, "network", "Bytes", per_interface=True,
        )  # fmt: skip
        yield MetricSpec(
            f"{prefix}.network.errors", "{error}", SUM, True, "Receive and transmit errors.",
            group, "network", "Errors", per_interface=True,
        )  # fmt: skip
    for suffix, field, description in _FS:
        yield MetricSpec(
            f"{prefix}.filesystem.{suffix}", "By", GAUGE, False, description,
            group, FS_BLOCK[group], field,
        )  # fmt: skip


def _volume_specs() -> Iterator[MetricSpec]:
    for suffix, unit, field, description in _VOLUME:
        yield MetricSpec(
            f"k8s.volume.{suffix}", unit, GAUGE, False, description, Group.VOLUME, "", field
        )


CATALOG: tuple[MetricSpec, ...] = (
    *_entity_specs(Group.NODE),
    *_entity_specs(Group.POD),
    *_entity_specs(Group.CONTAINER),
    *_volume_specs(),
)
BY_NAME = {spec.name: spec for spec in CATALOG}
