"""The `health_check` extension: liveness and readiness for the kubelet's probes.

`/healthz` answers 200 while the pipelines' event loop runs (it marks itself alive every
second; 30 s without a mark is 503 `stalled`). `/readyz` (and `path`, `/` by default, as the
Collector's health_check) answers 200 once the pipelines started and every enabled source
answered at least once, else 503 with the reasons as JSON (unlike an endpoint that always says
200, a broken source shows here). The server has its own thread: a busy pipeline never delays
a probe.

On a reload the old extension parks its server (Settings.listeners) and the new one, on the
same endpoint, takes it over: the port stays open. Between the two, `/readyz` answers from
the stopped service ("pipelines not started", 503) and `/healthz` still answers 200.
"""

from __future__ import annotations

import asyncio

from otelgpu.component.component import Host, Settings
from otelgpu.component.tasks import cancel_and_wait
from otelgpu.config.types import split_endpoint
from otelgpu.extensions.health_check.config import HealthCheckExtensionConfig
from otelgpu.extensions.health_check.server import ProbeServer

_BEAT_INTERVAL = 1.0  # seconds between two "the event loop runs" marks


class HealthCheckExtension:
    """Serves `/healthz` and `/readyz` on its own port."""

    def __init__(self, settings: Settings, config: HealthCheckExtensionConfig) -> None:
        self._settings = settings
        self._config = config
        self._host: Host | None = None
        self._server: ProbeServer | None = None
        self._heart: asyncio.Task[None] | None = None
        self.port: int | None = None

    async def start(self, host: Host) -> None:
        self._host = host
        address, port = split_endpoint(self._config.endpoint)
        listeners = self._settings.listeners
        kept = None
        if listeners is not None:  # a reload: the previous extension's server
            kept = await listeners.take(address, port, None, ProbeServer)
        if kept is not None:
            kept.serve(self._readiness, self._config.path)
            server = kept
        else:
            server = ProbeServer(address, port, self._readiness, self._config.path)
            await server.start()
        self._server = server
        self.port = server.port
        server.beat()
        self._heart = asyncio.create_task(self._beat(server), name="health_check heartbeat")
        how = " (listener kept through the reload)" if kept else ""
        self._settings.logger.info(
            "serving /healthz, /readyz and %s on %s%s",
            self._config.path,
            self._config.endpoint,
            how,
        )

    @property
    def connections(self) -> int:
        """Client connections open now."""
        return self._server.connections if self._server else 0

    async def shutdown(self) -> None:
        heart, self._heart = self._heart, None
        if heart is not None:
            await cancel_and_wait(heart)
        server, self._server = self._server, None
        if server is None:
            return
        listeners = self._settings.listeners
        address, port = split_endpoint(self._config.endpoint)
        if not (listeners is not None and listeners.park(address, port, None, server)):
            await server.stop()

    async def _beat(self, server: ProbeServer) -> None:
        # /healthz is answered from another thread: this says the pipeline's loop still runs.
        while True:
            server.beat()
            await asyncio.sleep(_BEAT_INTERVAL)

    def _readiness(self) -> tuple[bool, list[str]]:
        return self._host.readiness() if self._host else (False, ["not started"])
