"""The listening socket of the agent's HTTP endpoints (`/metrics`, `/health`, `/healthz`, ...).

Each listener runs on **its own thread with its own event loop**, so the pipeline's CPU work
(receivers, processors, Prometheus ingest, OTLP encode, all on the service's loop) can never
delay an answer: a handler reads an immutable value the pipeline published (a pre-rendered
body, a readiness answer) and writes it. HTTP/1.1 is spoken by h11 (no hand-parsed HTTP;
aiohttp's server cost ~10 MiB of resident memory for three fixed routes) inside an
`asyncio.Protocol`: a request whose answer is ready at once (every answer but a password check)
is answered in the same `data_received` call that read it, with no task and no further turn of
the loop. Each turn is a system call that releases the GIL, and taking the GIL back while the
pipeline computes is where a scrape waits (docs/dev/p7.md); a handler that must wait (a bcrypt
check) returns an awaitable instead, and that request is answered from a task.

Bounds a default server lacks:

- at most `max_connections` open at once: a new connection beyond that closes the oldest one
  (almost always an idle keep-alive: a request here is answered from memory in microseconds),
  so a flood of idle connections cannot lock a real scraper out or exhaust file descriptors;
- a connection idle for `idle_timeout` seconds (before its first request, between two, or not
  reading what it asked for) is closed; while an answer waits for the client to read it,
  nothing more is read from it either, so a client that sends without reading cannot grow
  the agent's buffers;
- a request head over 16 KiB is refused (431), a request body (never needed here) over 64 KiB
  too (413); the refusal is followed by a lingering close (our side shut, what the client
  still sends dropped for up to 2 s), so the client reads the answer instead of a reset;
- a handler's awaited answer that is called off (a reload closing the password checker)
  answers 503 with `Retry-After: 1`;
- each accepted connection asks for a send buffer big enough for a whole 10k-series body
  (`http_send_buffer`), where the kernel allows more than TCP autotuning
  would reach: one `send` then hands the body over, instead of a wake-up (and a wait for the
  GIL) per refill; elsewhere a big body goes to the transport in 1 MiB slices of itself, so
  asyncio copies at most one slice's unsent rest instead of the whole body's;
- `socket.accept()` failures ("Too many open files") are logged at most once a minute with the
  count of lines left out, instead of one traceback per attempt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import ssl
import sys
import threading

from otelgpu.http_connection import Connection, Handler, Request, Response
from otelgpu.log_limits import RateLimitedLog

# A listener's owners import the request and answer types from here, with the listener.
__all__ = [
    "IDLE_TIMEOUT",
    "MAX_CONNECTIONS",
    "SWITCH_INTERVAL",
    "Handler",
    "Listener",
    "Request",
    "Response",
]

MAX_CONNECTIONS = 256
IDLE_TIMEOUT = 30.0  # longer than the kubelet's probe period, so probes reuse their connection
# How long a thread that wants the GIL waits before the holder must hand it over. A scrape
# takes the GIL back after each system call (wake-up, read, send); at the default 5 ms each
# could wait that long while the pipeline thread computed (15-20 ms a scrape). 0.1 ms bounds
# the wait: in four interleaved P7 runs it beat 0.25 ms on the busy/paused p99 ratio every time
# (gzip 1.2-2.1 vs 1.9-3.3), with no more agent CPU. It costs nothing while the HTTP thread
# sleeps in its selector (no thread asks for the GIL then).
SWITCH_INTERVAL = 0.0001

_ACCEPT_ERROR = "socket.accept() out of system resource"
_log = logging.getLogger("otelgpu.http")


class Listener:
    """Serves `handler` on `host:port` from its own thread; `start` raises OSError when the
    address is unusable. `handler` runs on the listener's loop: it must not touch the
    pipeline's asyncio objects, only values the pipeline replaces whole."""

    def __init__(
        self,
        handler: Handler,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
        name: str = "otelgpu http",
    ) -> None:
        self.handler = handler  # replaced whole by a new owner (reload): read once per request
        self._host, self._port = host, port
        self._ssl = ssl_context
        self._max = max_connections
        self.idle_timeout = idle_timeout
        self._name = name
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()  # stop() came before the loop ran
        self._open: dict[Connection, None] = {}  # oldest first
        self.errors = RateLimitedLog(_log)  # a failing handler: a line a minute, not a request
        self.port = port

    @property
    def connections(self) -> int:
        """Connections open now, not counting those being closed."""
        return len(self._open)

    async def start(self) -> None:
        _quiet_accept_errors()
        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
        bound: concurrent.futures.Future[int] = concurrent.futures.Future()
        thread = threading.Thread(target=self._run, args=(bound,), name=self._name, daemon=True)
        thread.start()
        self._thread = thread  # from here `stop` ends it, whatever happens below
        try:
            self.port = await asyncio.wrap_future(bound)
        except BaseException:  # the bind failed, or start() was cancelled meanwhile
            await self.stop()
            raise

    async def stop(self) -> None:
        """Closes the listener and every open connection, and ends the thread; idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping.set()
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)

    # --- the listener's thread ------------------------------------------------------------

    def _run(self, bound: concurrent.futures.Future[int]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                server = loop.run_until_complete(self._bind())
            except BaseException as exc:
                with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled
                    bound.set_exception(exc)
                return
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                bound.set_result(int(server.sockets[0].getsockname()[1]))
            if not self._stopping.is_set():  # else stop() came first: its loop.stop was lost
                loop.run_forever()  # until stop()
            loop.run_until_complete(self._close(server))
        finally:
            loop.close()

    async def _bind(self) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        return await loop.create_server(
            lambda: Connection(self),
            self._host,
            self._port,
            ssl=self._ssl,
            ssl_handshake_timeout=self.idle_timeout if self._ssl else None,
            reuse_address=True,
        )

    async def _close(self, server: asyncio.Server) -> None:
        server.close()
        open_now, self._open = self._open, {}
        waiting = [c.pending for c in open_now if c.pending is not None]
        for connection in open_now:
            connection.abort()  # its awaited answer (a bcrypt check) is cancelled with it
        await asyncio.gather(*waiting, return_exceptions=True)
        await server.wait_closed()

    def opened(self, connection: Connection) -> None:
        """A new connection: counted, and the oldest closed if that makes one too many."""
        excess = len(self._open) - self._max + 1
        for oldest in list(self._open)[: max(0, excess)]:
            del self._open[oldest]
            oldest.abort()  # not a graceful close: `stop` no longer sees it, it must end now
        self._open[connection] = None

    def closed(self, connection: Connection) -> None:
        self._open.pop(connection, None)


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
