"""The listening socket of the agent's HTTP endpoints (`/metrics`, `/healthz`, `/readyz`).

An aiohttp application served with three bounds a default server lacks:

- at most `max_connections` open at once: a new connection beyond that closes the oldest one
  (almost always an idle keep-alive: a request here is answered from memory in microseconds),
  so a flood of idle connections cannot lock a real scraper out or exhaust file descriptors;
- a connection idle for `idle_timeout` seconds, before its first request or between two, is
  closed (aiohttp's default keeps it about an hour);
- `socket.accept()` failures ("Too many open files") are logged at most once a minute with the
  count of lines left out, instead of one traceback per attempt.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from aiohttp import web

from otelgpu.log_limits import RateLimitedLog

MAX_CONNECTIONS = 256
IDLE_TIMEOUT = 30.0  # longer than the kubelet's probe period, so probes reuse their connection

_ACCEPT_ERROR = "socket.accept() out of system resource"


class Listener:
    """Serves `app` on `host:port`; `start` raises OSError when the address is unusable."""

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self._app = app
        self._host, self._port = host, port
        self._ssl = ssl_context
        self._max = max_connections
        self._idle = idle_timeout
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._evicted: set[Any] = set()  # handlers being closed to make room
        self.port = port

    @property
    def connections(self) -> int:
        """Connections open now, not counting those being closed."""
        server = self._runner.server if self._runner else None
        return 0 if server is None else len(server.connections) - len(self._evicted)

    async def start(self) -> None:
        _quiet_accept_errors()
        runner = web.AppRunner(
            self._app, access_log=None, handle_signals=False, keepalive_timeout=self._idle
        )
        await runner.setup()
        try:
            self._server = await asyncio.get_running_loop().create_server(
                self._accept, self._host, self._port, ssl=self._ssl, reuse_address=True
            )
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Closes the listener and every open connection; idempotent."""
        server, self._server = self._server, None
        runner, self._runner = self._runner, None
        if server is not None:
            server.close()
        if runner is not None:
            await runner.cleanup()
        if server is not None:
            await server.wait_closed()

    def _accept(self) -> asyncio.BaseProtocol:
        assert self._runner is not None and self._runner.server is not None
        handlers = self._runner.server
        current = handlers.connections
        self._evicted.intersection_update(current)  # forget those already gone
        open_now = [h for h in current if h not in self._evicted]
        for oldest in open_now[: max(0, len(open_now) - self._max + 1)]:
            self._evicted.add(oldest)
            if oldest.transport is not None:
                oldest.transport.close()
        return handlers()


class _AcceptErrors(logging.Filter):
    """Turns asyncio's accept-failure tracebacks into one short line a minute."""

    def __init__(self) -> None:
        super().__init__()
        self._limit = RateLimitedLog(logging.getLogger("otelgpu.http"))

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_ACCEPT_ERROR):
            return True
        error = record.exc_info[1] if record.exc_info else None
        self._limit.log(
            logging.ERROR,
            "HTTP endpoints cannot accept connections: %s (asyncio retries in 1s)",
            error or "out of system resource",
        )
        return False


_FILTER = _AcceptErrors()


def _quiet_accept_errors() -> None:
    # asyncio logs accept failures through its own logger, one traceback per attempt; the
    # filter is one object, so adding it again (each listener, each reload) changes nothing.
    logging.getLogger("asyncio").addFilter(_FILTER)
