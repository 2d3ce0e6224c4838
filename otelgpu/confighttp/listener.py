"""The listening socket of the agent's HTTP endpoints (`/metrics`, `/health`, `/healthz`, ...).

Each listener runs on **its own thread with its own event loop**, so the pipeline's CPU work
(receivers, processors, Prometheus ingest, OTLP encode, all on the service's loop) can never
delay an answer: a handler reads an immutable value the pipeline published (a pre-rendered
body, a readiness answer) and writes it. HTTP/1.1 is parsed by httptools (llhttp, in C; no
hand-parsed HTTP) inside an `asyncio.Protocol` (`otelgpu.confighttp.connection`): a request whose
answer is ready at once (every answer but a password check) is answered in the same
`data_received` call that read it, with no task and no further turn of the loop. Each turn is a
system call that releases the GIL, and taking the GIL back while the pipeline computes is
where a scrape waits (docs/dev/p7.md); a handler that must wait (a bcrypt check) returns an
awaitable instead, and that request is answered from a task.

Bounds a default server lacks:

- at most `max_connections` open at once, counted from the accept (a TLS handshake in progress
  is one). A connection is *established* once it has been answered a success (a scrape that
  passed its password check, when there is one); until then it is *unproven* (a handshake in
  progress, a client that has sent nothing or only a partial head, one answered 401/429). A
  new connection beyond the cap closes the oldest unproven one, never an established one;
  when every open connection is established, the newcomer is closed instead. So a flood of
  idle connections, of handshakes that never finish or of wrong passwords can neither reset
  a scraper's keep-alive connection nor exhaust file descriptors, and a new scraper's
  connection displaces the flood's;
- a TLS handshake that has not finished after `handshake_timeout` seconds is dropped;
- a request whose head (and body) has not arrived whole `header_timeout` seconds after its
  first byte is dropped: a client trickling a byte at a time (slowloris) does not hold its
  slot by looking busy;
- a connection idle for `idle_timeout` seconds (before its first request, between two, while
  an answer is awaited) is closed;
- an answer not wholly handed to the kernel `write_timeout` seconds after it started (a
  client that does not read it, or reads a trickle) drops the connection with a reset, so the
  kernel frees what it held for it; while an answer waits for the client, nothing more is
  read from it either, so a client that sends without reading cannot grow the agent's buffers;
- each connection asks for a small fixed kernel send buffer and hands the kernel a big answer
  in slices of the body object itself (`otelgpu.confighttp.send_buffer`): a client that stops
  reading holds ~128 KiB of kernel memory and at most one slice's copy, whatever it asked for;
- a request head over 16 KiB is refused (431), a request body (never needed here) over
  64 KiB too (413), anything the parser refuses (ambiguous framing among it) gets 400; the
  refusal is followed by a lingering close (our side shut, what the client still sends
  dropped for up to 2 s), so the client reads the answer instead of a reset; at most 16
  pipelined requests are parsed ahead of their answers, the last of them closes the
  connection;
- a handler's awaited answer that is called off (a reload closing the password checker)
  answers 503 with `Retry-After: 1`;
- `socket.accept()` failures ("Too many open files") on the listener's loop are logged at most
  once a minute with the count of lines left out, instead of one traceback per attempt.

A listener changes nothing outside itself: the GIL switch interval the agent runs with
(`SWITCH_INTERVAL`) is set once by the agent at start-up (`otelgpu.service.agent`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import ssl
import threading
from typing import Any

from otelgpu.component.log_limits import RateLimitedLog
from otelgpu.confighttp.connection import Connection
from otelgpu.confighttp.messages import Handler, Request, Response

# A listener's owners import the request and answer types from here, with the listener.
__all__ = [
    "HANDSHAKE_TIMEOUT",
    "HEADER_TIMEOUT",
    "IDLE_TIMEOUT",
    "MAX_CONNECTIONS",
    "SWITCH_INTERVAL",
    "WRITE_TIMEOUT",
    "Handler",
    "Listener",
    "Request",
    "Response",
]

MAX_CONNECTIONS = 256
IDLE_TIMEOUT = 30.0  # longer than the kubelet's probe period, so probes reuse their connection
# An answer that has not left in this long is of no use to anyone: Prometheus gives up on a
# scrape after its scrape_timeout (10 s by default, never more than the scrape interval).
WRITE_TIMEOUT = 30.0
HANDSHAKE_TIMEOUT = 10.0  # a TLS handshake takes milliseconds; asyncio's default is 60 s
# A scraper or a probe writes its request in one go; a head still arriving after this long is
# a slowloris. (Go's net/http has no such bound unless ReadHeaderTimeout is set; 10 s is what
# exporter-toolkit's users commonly set.)
HEADER_TIMEOUT = 10.0
# How long a thread that wants the GIL waits before the holder must hand it over; the agent
# sets it at start-up (otelgpu.service.agent). A scrape takes the GIL back after each system
# call (wake-up, read, send); at the default 5 ms each could wait that long while the pipeline
# thread computed (15-20 ms a scrape). 0.1 ms bounds the wait: in four interleaved P7 runs it
# beat 0.25 ms on the busy/paused p99 ratio every time (gzip 1.2-2.1 vs 1.9-3.3), with no more
# agent CPU. It costs nothing while the HTTP thread sleeps in its selector (no thread asks for
# the GIL then).
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
        write_timeout: float = WRITE_TIMEOUT,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        header_timeout: float = HEADER_TIMEOUT,
        name: str = "otelgpu http",
    ) -> None:
        self.handler = handler  # replaced whole by a new owner (reload): read once per request
        self._host, self._port = host, port
        self.ssl_context = ssl_context
        self._max = max_connections
        self.idle_timeout = idle_timeout
        self.write_timeout = write_timeout
        self.handshake_timeout = handshake_timeout
        self.header_timeout = header_timeout
        self._name = name
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()  # stop() came before the loop ran
        # Open connections, oldest first: not yet answered a success, and established.
        self._unproven: dict[Connection, None] = {}
        self._established: dict[Connection, None] = {}
        self.errors = RateLimitedLog(_log)  # a failing handler: a line a minute, not a request
        self._accept_errors = RateLimitedLog(_log)
        self.port = port

    @property
    def connections(self) -> int:
        """Connections open now (TLS handshakes in progress included), not counting those
        being closed."""
        return len(self._unproven) + len(self._established)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The listener's own event loop while its thread runs."""
        return self._loop

    async def start(self) -> None:
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
        loop.set_exception_handler(self._loop_error)
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
            self._loop = None
            loop.close()

    async def _bind(self) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        # No `ssl=` here: asyncio would count a connection only once its handshake finished.
        # Each connection starts TLS itself, after the listener has counted it.
        return await loop.create_server(
            lambda: Connection(self), self._host, self._port, reuse_address=True
        )

    async def _close(self, server: asyncio.Server) -> None:
        server.close()
        open_now = [*self._unproven, *self._established]
        self._unproven, self._established = {}, {}
        waiting = [task for c in open_now for task in (c.pending, c.handshake) if task is not None]
        for connection in open_now:
            connection.abort()  # its awaited answer (a bcrypt check) is cancelled with it
        await asyncio.gather(*waiting, return_exceptions=True)
        await server.wait_closed()

    def opened(self, connection: Connection) -> bool:
        """A new connection: counted, and the oldest unproven one closed if that makes one too
        many. False (the newcomer is not counted and must close) when every connection open
        is established."""
        while self.connections >= self._max:
            if not self._unproven:
                return False
            oldest = next(iter(self._unproven))
            del self._unproven[oldest]
            oldest.abort()  # not a graceful close: `stop` no longer sees it, it must end now
        self._unproven[connection] = None
        return True

    def established(self, connection: Connection) -> None:
        """`connection` was answered a success: no newcomer evicts it from now on."""
        if connection in self._unproven:
            del self._unproven[connection]
            self._established[connection] = None

    def closed(self, connection: Connection) -> None:
        self._unproven.pop(connection, None)
        self._established.pop(connection, None)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The listener's loop reports accept failures ("Too many open files") here, one per
        attempt with a traceback: they become one short line a minute."""
        if not str(context.get("message", "")).startswith(_ACCEPT_ERROR):
            loop.default_exception_handler(context)
            return
        self._accept_errors.log(
            logging.ERROR,
            "HTTP endpoints cannot accept connections: %s (asyncio retries in 1s)",
            context.get("exception") or "out of system resource",
        )
