"""The `health_check` extension: liveness and readiness for the kubelet's probes.

`/healthz` answers 200 while the event loop runs. `/readyz` answers 200 once the pipelines
started and every enabled source answered at least once, else 503 with the reasons as JSON
(unlike an endpoint that always says 200, a broken source shows here).
"""

from __future__ import annotations

from aiohttp import web

from otelgpu.component import Host, Settings
from otelgpu.config.types import split_endpoint
from otelgpu.extensions.health_check.config import HealthCheckExtensionConfig
from otelgpu.http_listener import Listener


class HealthCheckExtension:
    """Serves `/healthz` and `/readyz` on its own port."""

    def __init__(self, settings: Settings, config: HealthCheckExtensionConfig) -> None:
        self._settings = settings
        self._config = config
        self._host: Host | None = None
        self._listener: Listener | None = None
        self.port: int | None = None

    async def start(self, host: Host) -> None:
        self._host = host
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        address, port = split_endpoint(self._config.endpoint)
        # Capped connections and a short idle timeout, as on /metrics: a flood of idle
        # connections must not make the kubelet's probes time out and restart the agent.
        listener = Listener(app, address, port)
        await listener.start()
        self._listener = listener
        self.port = listener.port
        self._settings.logger.info("serving /healthz and /readyz on %s", self._config.endpoint)

    @property
    def connections(self) -> int:
        """Client connections open now."""
        return self._listener.connections if self._listener else 0

    async def shutdown(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.stop()

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def _readyz(self, _request: web.Request) -> web.Response:
        ready, reasons = self._host.readiness() if self._host else (False, ["not started"])
        body = {"status": "ready" if ready else "not ready", "reasons": reasons}
        return web.json_response(body, status=200 if ready else 503)
