"""The service: starts a built graph downstream-first and stops it upstream-first."""

from __future__ import annotations

import asyncio
import logging

from otelgpu.component.component import Component
from otelgpu.component.errors import StartError
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.registry import Registry
from otelgpu.component.tasks import cancel_and_wait
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.schema import AgentConfig
from otelgpu.service.graph import Graph, build
from otelgpu.service.telemetry_endpoint import PullReaders

_log = logging.getLogger("otelgpu.service")


class Service:
    """One configuration's running pipelines. It is also the `Host` components see."""

    def __init__(
        self,
        config: AgentConfig,
        registry: Registry,
        telemetry: SelfTelemetry,
        listeners: KeptListeners | None = None,
    ) -> None:
        self.config = config
        self._listeners = listeners
        self._registry = registry
        self._telemetry = telemetry
        self.graph: Graph | None = None
        self._started: list[tuple[str, str, Component]] = []
        self._push_task: asyncio.Task[None] | None = None
        self.readers = PullReaders(config.telemetry.metrics.readers, telemetry, listeners)
        self._running = False

    @property
    def telemetry(self) -> SelfTelemetry:
        return self._telemetry

    def readiness(self) -> tuple[bool, list[str]]:
        """Ready once every component started and every registered source answered once."""
        reasons = [] if self._running else ["pipelines not started"]
        reasons += [f"source {r}" for r in self._telemetry.sources_not_ready()]
        return not reasons, reasons

    async def start(self) -> None:
        """Builds and starts everything; on a failure, stops what started and raises StartError."""
        self.graph = build(self.config, self._registry, self._telemetry, self._listeners)
        # Health is per component: the sources this graph's components register replace those
        # of the previous service (after a reload), which would otherwise stay down forever.
        self._telemetry.open_source_claims()
        # With a pull reader of its own, the agent's metrics leave the exporters' /metrics.
        self._telemetry.pulled_apart(bool(self.config.telemetry.metrics.readers))
        try:
            await self.readers.start()
        except StartError:
            await self.shutdown()
            raise
        for label, kind, component in self.graph.start_order():
            try:
                await component.start(self)
            except Exception as exc:
                self._started.append((label, kind, component))  # half-started: shut it down too
                await self.shutdown()
                raise StartError(label, kind, exc) from exc
            self._started.append((label, kind, component))
        if self.config.telemetry_exporters:
            self._push_task = asyncio.create_task(self._push_telemetry(), name="telemetry-push")
        self._running = True
        if gone := self._telemetry.retire_unclaimed_sources():
            _log.info("no longer watching sources: %s", ", ".join(gone))
        _log.info(
            "started %d pipelines: %s", len(self.graph.heads), ", ".join(map(str, self.graph.heads))
        )

    async def shutdown(self, deadline: float | None = None) -> None:
        """Stops upstream first so downstream can drain; idempotent; never raises.

        Components of one kind stop together (four exporters drain in parallel, not one after
        the other). Past `deadline` (event-loop time) a component still stopping is cancelled,
        and one not yet stopped is stopped already cancelled: an exporter's cancelled shutdown
        still counts and logs every point it could not send, so nothing goes uncounted.
        """
        self._running = False
        task, self._push_task = self._push_task, None
        await cancel_and_wait(task)
        while self._started:
            kind = self._started[-1][1]
            stage = []
            while self._started and self._started[-1][1] == kind:
                stage.append(self._started.pop())
            await asyncio.gather(*(_stop(*entry, deadline) for entry in stage))
        await self.readers.shutdown()  # last: a scrape during the drain still answers

    async def _push_telemetry(self) -> None:
        assert self.graph is not None
        exporters = [self.graph.exporters[cid] for cid in self.config.telemetry_exporters]
        while True:
            await asyncio.sleep(self.config.telemetry.metrics.interval)
            batch = (self._telemetry.collect(reader=True),)
            for exporter in exporters:
                try:
                    await exporter.consume(batch)
                except Exception:
                    _log.exception("pushing self-telemetry failed")


async def _stop(label: str, kind: str, component: Component, deadline: float | None) -> None:
    """Shuts one component down before `deadline`; logs, never raises."""
    try:
        async with asyncio.timeout_at(deadline):
            await component.shutdown()
    except TimeoutError:
        _log.error('"%s" %s did not stop before the stop deadline; cancelled', label, kind)
    except Exception:
        _log.exception('failed to shut down "%s" %s', label, kind)
