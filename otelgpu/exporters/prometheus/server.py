"""The HTTP side: aiohttp serving the current pre-rendered body at `/metrics`.

A request reads one immutable `Body` reference and writes bytes; it never renders, never
collects, and never waits on NVML, the kubelet or a container runtime.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from aiohttp import web

from otelgpu.exporters.prometheus.auth import BasicAuthenticator
from otelgpu.exporters.prometheus.render import CONTENT_TYPE, Body

_UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Basic realm="otelgpu", charset="UTF-8"'}


class MetricsServer:
    """Serves `current()` at `/metrics`; `on_scrape(status)` is told every answer's status."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        current: Callable[[], Body],
        on_scrape: Callable[[int], None],
        ssl_context: ssl.SSLContext | None = None,
        authenticator: BasicAuthenticator | None = None,
    ) -> None:
        self._host, self._port = host, port
        self._current = current
        self._on_scrape = on_scrape
        self._ssl = ssl_context
        self._auth = authenticator
        self._runner: web.AppRunner | None = None
        self.port = port

    async def start(self) -> None:
        """Binds and listens; raises OSError when the address is taken."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port, ssl_context=self._ssl)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        addresses = runner.addresses
        self.port = int(addresses[0][1]) if addresses else self._port

    async def stop(self) -> None:
        """Closes the listener and open connections; idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._auth is not None and not await self._auth.check(
            request.headers.get("Authorization")
        ):
            self._on_scrape(401)
            return web.Response(status=401, text="unauthorized\n", headers=_UNAUTHORIZED_HEADERS)
        body = self._current()
        headers = {"Content-Type": CONTENT_TYPE, "Vary": "Accept-Encoding"}
        if _accepts_gzip(request.headers.get("Accept-Encoding", "")):
            headers["Content-Encoding"] = "gzip"
            payload = body.gzipped
        else:
            payload = body.plain
        self._on_scrape(200)
        return web.Response(body=payload, headers=headers)


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
