"""The kubelet_stats receiver's metric catalogs: one table per naming drives reading, config
and docs.

`metric_names: semconv` (the default) follows the OpenTelemetry semantic conventions wherever
they name a metric (page faults as one `*.memory.paging.faults` counter split by
`system.paging.fault.type`, volumes as `k8s.pod.volume.*`, filesystems and volumes as
UpDownCounters) and the Collector's `kubeletstats` receiver for the metrics they do not name
(container memory available, rss and working set, the container's filesystem).
`metric_names: contrib` is the `kubeletstats` receiver's names and types throughout (page
faults as two gauges, `k8s.volume.*`), for dashboards built on it. Each `MetricSpec` says which
summary block (`cpu`, `memory`, ...) and field it reads; the summary reader (`summary.py`) is
generic over these tables and `docs/kubelet_stats.md` is rendered from them
(`python -m otelgpu.receivers.kubelet_stats.docs`).
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
FAULT_TYPE = "system.paging.fault.type"  # datapoint: major | minor (semantic conventions)

GAUGE = MetricKind.GAUGE
SUM = MetricKind.SUM
NANO = 1e-9


class Naming(Enum):
    """`metric_names`: whose names and types the metrics follow."""

    SEMCONV = "semconv"
    CONTRIB = "contrib"


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
    `rx`/`tx` and one point is emitted per interface and direction. With `fault_types`, two
    points: `major` (`majorPageFaults`) and `minor` (`field`, every fault, minus the major
    ones). `kind` SUM with `monotonic` false is an UpDownCounter.
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
    fault_types: bool = False
    enabled: bool = True

    @property
    def attributes(self) -> tuple[str, ...]:
        """Datapoint attribute keys."""
        if self.fault_types:
            return (FAULT_TYPE,)
        return (NETWORK_INTERFACE_NAME, DIRECTION) if self.per_interface else ()

    @property
    def source(self) -> str:
        """The summary path read (`cpu.usageNanoCores`, `network.interfaces[].{rx,tx}Bytes`)."""
        if self.per_interface:
            return f"{self.block}.interfaces[].{{rx,tx}}{self.field}"
        if self.fault_types:
            return f"{self.block}.{{majorPageFaults, {self.field} - majorPageFaults}}"
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
_VOLUME = (  # semconv suffix, contrib suffix, unit, field, description
    ("available", "available", "By", "availableBytes", "Bytes available on the volume."),
    ("capacity", "capacity", "By", "capacityBytes", "Total bytes of the volume."),
    ("usage", "", "By", "usedBytes", "Bytes used on the volume."),
    ("inode.count", "inodes", "{inode}", "inodes", "Total inodes of the volume's filesystem."),
    ("inode.free", "inodes.free", "{inode}", "inodesFree", "Free inodes."),
    ("inode.used", "inodes.used", "{inode}", "inodesUsed", "Inodes used."),
)


def _entity_specs(group: Group, naming: Naming) -> Iterator[MetricSpec]:
    prefix, who = PREFIX[group], group.value
    semconv = naming is Naming.SEMCONV
    # The conventions make filesystem sizes UpDownCounters; the kubeletstats receiver, gauges.
    size_kind, size_monotonic = (SUM, False) if semconv else (GAUGE, False)
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
    if semconv:
        yield MetricSpec(
            f"{prefix}.memory.paging.faults", "{fault}", SUM, True,
            "Page faults, by type: major (read from disk) and minor (the rest).",
            group, "memory", "pageFaults", fault_types=True,
        )  # fmt: skip
    else:
        for suffix, field, description in (
            ("page_faults", "pageFaults", "Page faults (major included), as a gauge."),
            ("major_page_faults", "majorPageFaults", "Major page faults, as a gauge."),
        ):
            yield MetricSpec(
                f"{prefix}.memory.{suffix}",
                "{fault}",
                GAUGE,
                False,
                description,
                group,
                "memory",
                field,
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
            f"{prefix}.filesystem.{suffix}", "By", size_kind, size_monotonic, description,
            group, FS_BLOCK[group], field,
        )  # fmt: skip


def _volume_specs(naming: Naming) -> Iterator[MetricSpec]:
    for semconv_suffix, contrib_suffix, unit, field, description in _VOLUME:
        if naming is Naming.SEMCONV:
            yield MetricSpec(
                f"k8s.pod.volume.{semconv_suffix}", unit, SUM, False, description,
                Group.VOLUME, "", field,
            )  # fmt: skip
        elif contrib_suffix:
            yield MetricSpec(
                f"k8s.volume.{contrib_suffix}", unit, GAUGE, False, description,
                Group.VOLUME, "", field,
            )  # fmt: skip


def _catalog(naming: Naming) -> tuple[MetricSpec, ...]:
    return (
        *_entity_specs(Group.NODE, naming),
        *_entity_specs(Group.POD, naming),
        *_entity_specs(Group.CONTAINER, naming),
        *_volume_specs(naming),
    )


CATALOGS: dict[Naming, tuple[MetricSpec, ...]] = {naming: _catalog(naming) for naming in Naming}
CATALOG = CATALOGS[Naming.SEMCONV]  # the default naming's
