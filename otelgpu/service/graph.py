"""Builds the component graph from a validated config.

Receivers and exporters are one instance per ID, shared by every pipeline that names them;
processors are one instance per pipeline. A receiver used by several pipelines fans out to
each pipeline's head; a pipeline's head runs its processors then fans out to its exporters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from otelgpu.component.component import (
    Component,
    ComponentID,
    Exporter,
    Extension,
    Kind,
    MetricsConsumer,
    Processor,
    Receiver,
    Settings,
)
from otelgpu.component.consumer import FanOut, GuardedConsumer, PipelineHead
from otelgpu.component.errors import StartError
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.pod_listing import PodListings
from otelgpu.component.registry import Registry
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.collector_compat import factory_for
from otelgpu.config.schema import AgentConfig
from otelgpu.pdata.naming import NamingTable


@dataclass
class Graph:
    """Every component instance, keyed the way the service starts and stops them."""

    extensions: dict[ComponentID, Extension] = field(default_factory=dict)
    exporters: dict[ComponentID, Exporter] = field(default_factory=dict)
    processors: dict[tuple[ComponentID, ComponentID], Processor] = field(default_factory=dict)
    receivers: dict[ComponentID, Receiver] = field(default_factory=dict)
    heads: dict[ComponentID, PipelineHead] = field(default_factory=dict)
    # What pod-resources lists, shared by this graph's components (`Settings.pod_listings`)
    pod_listings: PodListings = field(default_factory=PodListings)

    def start_order(self) -> list[tuple[str, str, Component]]:
        """(label, kind, component) from downstream to upstream: extensions, exporters,
        processors (each pipeline's from its last to its first), receivers. Shutdown walks it
        backwards. A processor starts before what feeds it: container_env has listed the
        runtime before k8s_attributes first asks the kubelet, so that answer confirms the
        containers already running and the first batches carry their labels."""
        order: list[tuple[str, str, Component]] = []
        order += [(str(i), "extension", c) for i, c in self.extensions.items()]
        order += [(str(i), "exporter", c) for i, c in self.exporters.items()]
        processors = reversed(self.processors.items())
        order += [(f"{i} in {p}", "processor", c) for (p, i), c in processors]
        order += [(str(i), "receiver", c) for i, c in self.receivers.items()]
        return order


def build(
    config: AgentConfig,
    registry: Registry,
    telemetry: SelfTelemetry,
    listeners: KeptListeners | None = None,
) -> Graph:
    """Creates every component (no I/O happens here: factories only construct); `listeners`,
    the naming tables of the config's receivers and the graph's pod listing board are handed
    to each in its Settings."""
    graph = Graph()
    receivers = sorted({r for p in config.pipelines.values() for r in p.receivers})
    naming = NamingTable.merge(_naming(registry, cid) for cid in receivers)

    def create(kind: Kind, cid: ComponentID, *extra: Any) -> Any:
        factory = factory_for(registry, kind, cid)
        settings = Settings.for_component(
            cid, kind, telemetry, listeners, naming, graph.pod_listings
        )
        if factory.stability.value != "stable":
            settings.logger.debug("%s %s is %s", kind.value, cid, factory.stability.value)
        try:
            return factory.create(settings, config.components[kind][cid], *extra)
        except Exception as exc:
            raise StartError(str(cid), kind.value, exc) from exc

    for cid in config.extensions:
        graph.extensions[cid] = create(Kind.EXTENSION, cid)
    used_exporters = {e for p in config.pipelines.values() for e in p.exporters}
    for cid in sorted(used_exporters | set(config.telemetry_exporters)):
        graph.exporters[cid] = create(Kind.EXPORTER, cid)
    for pid, pipeline in config.pipelines.items():
        processors = []
        for cid in pipeline.processors:
            graph.processors[(pid, cid)] = create(Kind.PROCESSOR, cid)
            processors.append((str(cid), graph.processors[(pid, cid)]))
        exporters = [
            GuardedConsumer(str(e), cast(MetricsConsumer, graph.exporters[e]), telemetry)
            for e in pipeline.exporters
        ]
        head = PipelineHead(str(pid), processors, _one_or_fanout(exporters), telemetry)
        graph.heads[pid] = head
    for cid in receivers:
        heads = [
            GuardedConsumer(f"pipeline {pid}", graph.heads[pid], telemetry)
            for pid, p in config.pipelines.items()
            if cid in p.receivers
        ]
        graph.receivers[cid] = create(Kind.RECEIVER, cid, _one_or_fanout(heads))
    return graph


def _naming(registry: Registry, cid: ComponentID) -> NamingTable | None:
    """A receiver's naming table (None for an unknown type: `create` reports it)."""
    try:
        return factory_for(registry, Kind.RECEIVER, cid).naming
    except KeyError:
        return None


def _one_or_fanout(consumers: list[GuardedConsumer]) -> MetricsConsumer:
    """Every hand-over is guarded, a lone consumer too (it used to bypass the fan-out's guard,
    and one exception ended the receiver's scrape loop)."""
    return consumers[0] if len(consumers) == 1 else FanOut(consumers)
