"""The HTTP side of `health_check`: `/healthz` and `/readyz` on a capped listener.

Readiness is asked of a callable that can be swapped while the socket stays open (`serve`),
so the next service's extension takes the running server over on a reload and the kubelet's
probes are never refused.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from otelgpu.http_listener import Listener

Readiness = Callable[[], tuple[bool, list[str]]]


class ProbeServer:
    """Answers `/healthz` (alive while the loop runs) and `/readyz` (from `readiness()`)."""

    def __init__(self, host: str, port: int, readiness: Readiness) -> None:
        self._readiness = readiness
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        # Capped connections and a short idle timeout, as on /metrics: a flood of idle
        # connections must not make the kubelet's probes time out and restart the agent.
        self._listener = Listener(app, host, port)
        self.port = port

    @property
    def connections(self) -> int:
        """Client connections open now."""
        return self._listener.connections

    async def start(self) -> None:
        """Binds and listens; raises OSError when the address is taken."""
        await self._listener.start()
        self.port = self._listener.port

    async def stop(self) -> None:
        """Closes the listener and open connections; idempotent."""
        await self._listener.stop()

    def serve(self, readiness: Readiness) -> None:
        """Answers `/readyz` from `readiness` from now on (a new extension taking over)."""
        self._readiness = readiness

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def _readyz(self, _request: web.Request) -> web.Response:
        ready, reasons = self._readiness()
        body = {"status": "ready" if ready else "not ready", "reasons": reasons}
        return web.json_response(body, status=200 if ready else 503)
