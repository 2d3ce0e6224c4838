"""Component vocabulary shared by every receiver, processor, exporter and extension."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from otelgpu.component.clock import AGENT_CLOCK, Clock
from otelgpu.pdata.model import Batch
from otelgpu.pdata.naming import NO_NAMES, NamingTable

if TYPE_CHECKING:
    from otelgpu.component.kept_listeners import KeptListeners
    from otelgpu.component.pod_listing import PodListings
    from otelgpu.component.telemetry import SelfTelemetry


class Kind(Enum):
    """The four kinds of component, named as in the pipeline file's top-level sections."""

    RECEIVER = "receiver"
    PROCESSOR = "processor"
    EXPORTER = "exporter"
    EXTENSION = "extension"

    @property
    def section(self) -> str:
        """The pipeline file's section for this kind (`receivers`, ...)."""
        return self.value + "s"


class Stability(Enum):
    """How settled a component's config and output are, as the Collector grades them."""

    DEVELOPMENT = "development"
    ALPHA = "alpha"
    BETA = "beta"
    STABLE = "stable"


_TYPE_RE = re.compile(r"^[a-zA-Z][0-9a-zA-Z_]{0,62}$")
_NAME_RE = re.compile(r"^[^\s/]+$")


@dataclass(frozen=True, slots=True, order=True)
class ComponentID:
    """A component instance's identity: `type` or `type/name`."""

    type: str
    name: str = ""

    @classmethod
    def parse(cls, text: str) -> ComponentID:
        """Parses `type[/name]`; raises ValueError naming what is wrong."""
        type_, sep, name = text.partition("/")
        if not _TYPE_RE.match(type_):
            raise ValueError(
                f'invalid component id "{text}": the type must start with a letter and hold only '
                "letters, digits and underscores"
            )
        if sep and not _NAME_RE.match(name):
            raise ValueError(
                f'invalid component id "{text}": the name after "/" must be non-empty, '
                "without spaces or another /"
            )
        return cls(type_, name)

    def __str__(self) -> str:
        return f"{self.type}/{self.name}" if self.name else self.type


class MetricsConsumer(Protocol):
    """Anything that accepts batches: a pipeline, a fan-out, an exporter."""

    async def consume(self, batch: Batch) -> None:
        """Takes ownership of nothing (batches are immutable); must not raise for bad data."""


class Host(Protocol):
    """What the running service offers its components."""

    @property
    def telemetry(self) -> SelfTelemetry:
        """The agent's self-telemetry, shared by all components."""

    def readiness(self) -> tuple[bool, list[str]]:
        """Whether every pipeline started and every source answered once; the reasons if not."""


class Component(Protocol):
    """The lifecycle every component follows.

    `start` is called once, after the whole graph is built; it must return promptly and
    create any background task it needs, owned by the component. `shutdown` cancels and
    awaits everything `start` created, flushes what it holds, is idempotent, and is safe
    to call when `start` never ran or failed half way.
    """

    async def start(self, host: Host) -> None:
        """Begins work; raises to refuse starting (the service then reports which and why)."""

    async def shutdown(self) -> None:
        """Stops work and releases every resource; never raises for an already-stopped state."""


class Receiver(Component, Protocol):
    """Produces batches and hands them to the `next` consumer it was created with."""


class Exporter(Component, MetricsConsumer, Protocol):
    """Sends or serves batches; `consume` must return quickly (queue, don't block)."""


class Processor(Component, Protocol):
    """Transforms batches. `process` is a pure function of the batch and a snapshot the
    processor refreshes in the background: it does no I/O and never raises for bad data."""

    def process(self, batch: Batch) -> Batch:
        """Returns the transformed batch (possibly empty)."""


class Extension(Component, Protocol):
    """Serves the agent itself (health checks) rather than data."""


class Stateless:
    """Base for components with nothing to start or stop (pure processors, debug)."""

    async def start(self, host: Host) -> None:
        """Nothing to start."""

    async def shutdown(self) -> None:
        """Nothing to stop."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What every factory's `create` receives besides the component's config."""

    id: ComponentID
    kind: Kind
    logger: logging.Logger
    telemetry: SelfTelemetry
    # Where a component that listens parks its server on shutdown and takes it back in the
    # next service's start, so a reload keeps the port open. None: close it on shutdown.
    listeners: KeptListeners | None = None
    # The names the config's receivers give their metrics in other tools' vocabularies
    # (`Factory.naming`, merged): what an exporter's `naming: dcgm` renders.
    naming: NamingTable = NO_NAMES
    # What the kubelet's pod-resources API lists, posted by k8s_attributes for the components
    # that check their view of the node against it (kubelet_stats). One per service; None: no
    # listing is shared (a component built alone).
    pod_listings: PodListings | None = None
    # The clock of every component of the service (`otelgpu.component.clock.AGENT_CLOCK`):
    # times one component notes on a resource are compared by another (`pdata/notes.py`).
    clock: Clock = AGENT_CLOCK

    @classmethod
    def for_component(
        cls,
        id: ComponentID,
        kind: Kind,
        telemetry: SelfTelemetry,
        listeners: KeptListeners | None = None,
        naming: NamingTable = NO_NAMES,
        pod_listings: PodListings | None = None,
    ) -> Settings:
        """Settings with the logger named `otelgpu.<kind>.<id>`, the name operators grep for."""
        logger = logging.getLogger(f"otelgpu.{kind.value}.{id}")
        return cls(
            id=id,
            kind=kind,
            logger=logger,
            telemetry=telemetry,
            listeners=listeners,
            naming=naming,
            pod_listings=pod_listings,
        )
