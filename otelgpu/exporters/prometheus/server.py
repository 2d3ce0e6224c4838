"""The HTTP side: aiohttp serving the current pre-rendered body at `/metrics`.

A request reads one immutable `Body` reference and writes bytes; it never renders, never
collects, and never waits on NVML, the kubelet or a container runtime. Connections are capped
and idle ones closed (`otelgpu.http_listener`); a client whose password check would have to
wait behind others is answered 429 / 503 at once (`auth.AuthBusy`).

What a request is answered with (`current`, `on_scrape`, the authenticator) can be swapped
while the socket stays open (`serve`): that is how the next exporter instance takes a running
server over on a reload, with no moment the port is closed.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from aiohttp import web

from otelgpu.exporters.prometheus.auth import AuthBusy, BasicAuthenticator
from otelgpu.exporters.prometheus.render import CONTENT_TYPE, Body
from otelgpu.http_listener import IDLE_TIMEOUT, MAX_CONNECTIONS, Listener

_UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Basic realm="otelgpu", charset="UTF-8"'}


class MetricsServer:
    """Serves `current()` at `/metrics`; `on_scrape(status)` is told every answer's status.

    It owns the authenticator it is given: `stop` (or a `serve` replacing it) closes it.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        current: Callable[[], Body],
        on_scrape: Callable[[int], None],
        ssl_context: ssl.SSLContext | None = None,
        authenticator: BasicAuthenticator | None = None,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self._current = current
        self._on_scrape = on_scrape
        self._auth = authenticator
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._listener = Listener(
            app,
            host,
            port,
            ssl_context=ssl_context,
            max_connections=max_connections,
            idle_timeout=idle_timeout,
        )
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
        """Closes the listener, open connections and the authenticator; idempotent."""
        await self._listener.stop()
        await _close(self._auth)
        self._auth = None

    def current(self) -> Body:
        """The body a scrape gets right now."""
        return self._current()

    async def serve(
        self,
        current: Callable[[], Body],
        on_scrape: Callable[[int], None],
        authenticator: BasicAuthenticator | None,
    ) -> None:
        """Answers from now on with these (a new exporter taking the server over); closes the
        authenticator it replaces once no check is waiting on it."""
        replaced, self._auth = self._auth, authenticator
        self._current, self._on_scrape = current, on_scrape
        await _close(replaced)

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._auth is not None:
            try:
                allowed = await self._auth.check(
                    request.headers.get("Authorization"), peer=request.remote or ""
                )
            except AuthBusy as busy:
                self._on_scrape(busy.status)
                return web.Response(
                    status=busy.status, text=f"{busy}\n", headers={"Retry-After": "1"}
                )
            if not allowed:
                self._on_scrape(401)
                return web.Response(
                    status=401, text="unauthorized\n", headers=_UNAUTHORIZED_HEADERS
                )
        body = self._current()
        headers = {"Content-Type": CONTENT_TYPE, "Vary": "Accept-Encoding"}
        if _accepts_gzip(request.headers.get("Accept-Encoding", "")):
            headers["Content-Encoding"] = "gzip"
            payload = body.gzipped
        else:
            payload = body.plain
        self._on_scrape(200)
        return web.Response(body=payload, headers=headers)


async def _close(authenticator: BasicAuthenticator | None) -> None:
    if authenticator is not None:
        await asyncio.to_thread(authenticator.close)  # waits for a bcrypt check in progress


def _accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding value allows gzip (`gzip`, `*`, not `gzip;q=0`)."""
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        q = params.strip().replace(" ", "").lower()
        return not (q.startswith("q=") and _is_zero(q[2:]))
    return False


def _is_zero(text: str) -> bool:
    try:
        return float(text) == 0.0
    except ValueError:
        return False
