"""The HTTP side of `health_check`: `/healthz`, `/readyz` and the configured `path`.

The server runs on its own thread and event loop (`otelgpu.confighttp.listener`), so a busy
pipeline cannot make the kubelet's probes time out. Readiness is asked of a callable that
must be cheap and safe to call from that thread (the service's readiness reads two values and
copies one dict). It can be swapped while the socket stays open (`serve`), so the next
service's extension takes the running server over on a reload and no probe is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from otelgpu.confighttp.listener import Listener, Request, Response

Readiness = Callable[[], tuple[bool, list[str]]]

_JSON = (("Content-Type", "application/json; charset=utf-8"),)
_ALIVE = Response(200, b'{"status": "alive"}', _JSON)
_STALLED = Response(503, b'{"status": "stalled", "reasons": ["event loop not running"]}', _JSON)
# The pipeline's loop beats every second; this long without a beat means it is stuck (a busy
# loop beats late by a fraction of a second, a reload pauses it for a few seconds).
STALL_AFTER = 30.0
_NOT_FOUND = Response(404, b"404: Not Found\n", (("Content-Type", "text/plain"),))


class ProbeServer:
    """Answers `/healthz` (alive while the pipeline's event loop calls `beat`, at least every
    `STALL_AFTER` seconds), and `/readyz` and `path` (from `readiness()`)."""

    def __init__(
        self,
        host: str,
        port: int,
        readiness: Readiness,
        path: str = "/",
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._readiness = readiness
        self._path = path
        self._monotonic = monotonic
        self._beat = monotonic()
        # The listener's bounds, as on /metrics (capped connections, idle and write timeouts):
        # a flood of idle or non-reading clients must not make the kubelet's probes time out
        # and restart the agent.
        self._listener = Listener(self._handle, host, port, name=f"otelgpu health :{port}")
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
        """Closes the listener, open connections and its thread; idempotent."""
        await self._listener.stop()

    def beat(self) -> None:
        """The pipeline's event loop is running (called from it)."""
        self._beat = self._monotonic()

    def serve(self, readiness: Readiness, path: str = "/") -> None:
        """Answers `/readyz` and `path` from `readiness` from now on (a new extension taking
        over, possibly with another `path`)."""
        self._readiness, self._path = readiness, path

    def _handle(self, request: Request) -> Response:
        if request.path == self._path or request.path == "/readyz":
            return self._ready()
        if request.path == "/healthz":
            stalled = self._monotonic() - self._beat > STALL_AFTER
            return _STALLED if stalled else _ALIVE
        return _NOT_FOUND

    def _ready(self) -> Response:
        ready, reasons = self._readiness()
        body = {"status": "ready" if ready else "not ready", "reasons": reasons}
        return Response(200 if ready else 503, json.dumps(body).encode(), _JSON)
