"""The listening socket of the agent's HTTP endpoints (`/metrics`, `/health`, `/healthz`, ...).

Each listener runs on **its own thread with its own event loop**, so the pipeline's CPU work
(receivers, processors, Prometheus ingest, OTLP encode, all on the service's loop) can never
delay an answer: a handler reads an immutable value the pipeline published (a pre-rendered
body, a readiness answer) and writes it. HTTP/1.1 is spoken by h11 on asyncio streams (no
hand-parsed HTTP; aiohttp's server cost ~10 MiB of resident memory for three fixed routes).

Bounds a default server lacks:

- at most `max_connections` open at once: a new connection beyond that closes the oldest one
  (almost always an idle keep-alive: a request here is answered from memory in microseconds),
  so a flood of idle connections cannot lock a real scraper out or exhaust file descriptors;
- a connection idle for `idle_timeout` seconds (before its first request, between two, or not
  reading what it asked for) is closed;
- a request head still incomplete after 16 KiB is refused (431), a request body (never needed
  here) over 64 KiB too (413);
- each accepted connection asks for a send buffer big enough for a whole 10k-series body
  (`send_buffer_size`), where the kernel allows more than TCP autotuning would reach: one
  `send` then hands the body over, instead of a wake-up (and a wait for the GIL) per refill;
- `socket.accept()` failures ("Too many open files") are logged at most once a minute with the
  count of lines left out, instead of one traceback per attempt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import socket
import ssl
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import h11

from otelgpu.log_limits import RateLimitedLog

MAX_CONNECTIONS = 256
IDLE_TIMEOUT = 30.0  # longer than the kubelet's probe period, so probes reuse their connection
_MAX_HEAD = 16 * 1024
_MAX_REQUEST_BODY = 64 * 1024
_READ_SIZE = 64 * 1024
_SEND_BUFFER = 8 * 1024 * 1024  # a 10k-series plain body is ~6.4 MB
_JOIN_LIMIT = 256 * 1024  # bodies up to this go out in one send with their head (one copy)
_WMEM_MAX = "/proc/sys/net/core/wmem_max"  # the most SO_SNDBUF may ask for
_TCP_WMEM = "/proc/sys/net/ipv4/tcp_wmem"  # min, default, most autotuning grows a buffer to
_CLOSE_WAIT = 2.0  # seconds `stop` lets a request in progress end before cancelling it
# How long a thread that wants the GIL waits before the holder must hand it over. A scrape
# takes the GIL back after each system call (wake-up, read, send); at the default 5 ms each
# could wait that long while the pipeline thread computed (15-20 ms a scrape). 0.1 ms bounds
# the wait: in four interleaved P7 runs it beat 0.25 ms on the busy/paused p99 ratio every time
# (gzip 1.2-2.1 vs 1.9-3.3), with no more agent CPU. It costs nothing while the HTTP thread
# sleeps in its selector (no thread asks for the GIL then).
SWITCH_INTERVAL = 0.0001

_ACCEPT_ERROR = "socket.accept() out of system resource"
_log = logging.getLogger("otelgpu.http")


@dataclass(frozen=True, slots=True)
class Request:
    """One request: method, path (no query), headers (lower-case names), client address."""

    method: str
    path: str
    headers: Mapping[str, str]
    peer: str


@dataclass(frozen=True, slots=True)
class Response:
    """One answer. A `body` over 256 KiB is sent as is, never copied; a smaller one is joined
    to its head, so that it leaves in one send."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()


Handler = Callable[[Request], Awaitable[Response]]


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
        self._idle = idle_timeout
        self._name = name
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()  # stop() came before the loop ran
        self._open: dict[asyncio.Task[None], asyncio.StreamWriter] = {}  # oldest first
        self._errors = RateLimitedLog(_log)  # a failing handler: a line a minute, not a request
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
        return await asyncio.start_server(
            self._connection,
            self._host,
            self._port,
            ssl=self._ssl,
            ssl_handshake_timeout=self._idle if self._ssl else None,
            reuse_address=True,
            limit=_READ_SIZE,
        )

    async def _close(self, server: asyncio.Server) -> None:
        server.close()
        open_now, self._open = self._open, {}
        for writer in open_now.values():
            writer.transport.abort()  # its handler sees the connection lost and returns
        if open_now:
            _, late = await asyncio.wait(open_now, timeout=_CLOSE_WAIT)
            for task in late:  # e.g. waiting for a bcrypt check
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._make_room()
        self._open[task] = writer
        _size_send_buffer(writer)
        peer = writer.get_extra_info("peername")
        try:
            await self._serve(reader, writer, peer[0] if isinstance(peer, tuple) else "")
        except (OSError, TimeoutError, h11.ProtocolError):
            pass  # the client went away, stalled, or spoke something else: just close
        except asyncio.CancelledError:
            # Only `_close` cancels, and the task ends here anyway; on 3.11 a handler task
            # that ends cancelled is logged by asyncio.start_server as an error with a traceback.
            pass
        finally:
            self._open.pop(task, None)
            writer.close()

    def _make_room(self) -> None:
        excess = len(self._open) - self._max + 1
        for task in list(self._open)[: max(0, excess)]:
            writer = self._open.pop(task)
            writer.transport.close()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        try:
            await self._requests(conn, reader, writer, peer)
        except h11.RemoteProtocolError as error:
            _refuse(conn, writer, error.error_status_hint)

    async def _requests(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: str,
    ) -> None:
        while True:
            event = await self._next(conn, reader)
            if not isinstance(event, h11.Request):
                return  # closed (or a protocol state with nothing more to answer)
            request = Request(
                method=event.method.decode("ascii", "replace"),
                path=event.target.decode("ascii", "replace").partition("?")[0],
                headers={k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers},
                peer=peer,
            )
            await self._skip_body(conn, reader)
            response = await self._answer(request)
            await self._send(conn, writer, response, head_only=request.method == "HEAD")
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return  # Connection: close, HTTP/1.0, ...
            conn.start_next_cycle()

    async def _next(self, conn: h11.Connection, reader: asyncio.StreamReader) -> object:
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            async with asyncio.timeout(self._idle):
                data = await reader.read(_READ_SIZE)
            conn.receive_data(data)

    async def _skip_body(self, conn: h11.Connection, reader: asyncio.StreamReader) -> None:
        received = 0
        while True:
            event = await self._next(conn, reader)
            if isinstance(event, h11.Data):
                received += len(event.data)
                if received > _MAX_REQUEST_BODY:
                    raise h11.RemoteProtocolError("request body too large", 413)
            elif isinstance(event, h11.EndOfMessage):
                return
            else:
                raise h11.RemoteProtocolError("request ended early", 400)

    async def _answer(self, request: Request) -> Response:
        try:
            return await self.handler(request)
        except Exception:  # a handler bug must not kill the connection loop: answer 500
            self._errors.log(
                logging.ERROR, "answering %s %s failed", request.method, request.path, exc_info=True
            )
            return Response(500, b"internal error\n", (("Content-Type", "text/plain"),))

    async def _send(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        response: Response,
        *,
        head_only: bool,
    ) -> None:
        headers = [*response.headers, ("Content-Length", str(len(response.body)))]
        parts = [conn.send(h11.Response(status_code=response.status, headers=headers)) or b""]
        if response.body and not head_only:
            # Passthrough: the body object itself, not a copy (h11 adds nothing with a
            # Content-Length).
            parts += conn.send_with_data_passthrough(h11.Data(data=response.body)) or ()
        parts.append(conn.send(h11.EndOfMessage()) or b"")
        if len(response.body) <= _JOIN_LIMIT:
            # One send instead of two: each send releases the GIL, and taking it back while
            # the pipeline computes can cost a switch interval. A big body is not copied.
            writer.write(b"".join(parts))
        else:
            for part in parts:
                writer.write(part)  # asyncio ignores the empty end of message
        async with asyncio.timeout(self._idle):  # a client that stops reading is dropped
            await writer.drain()


def _size_send_buffer(writer: asyncio.StreamWriter) -> None:
    size = send_buffer_size()
    sock = writer.get_extra_info("socket")
    if size is None or sock is None:
        return
    with contextlib.suppress(OSError):  # best effort: autotuning still works without it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


@functools.cache
def send_buffer_size() -> int | None:
    """The SO_SNDBUF accepted connections ask for, or None to leave them to TCP autotuning
    (read from this kernel's limits once)."""
    try:
        with open(_WMEM_MAX, encoding="ascii") as file:
            wmem_max = int(file.read())
        with open(_TCP_WMEM, encoding="ascii") as file:
            autotune_max = int(file.read().split()[2])
    except (OSError, ValueError, IndexError):  # not Linux, or no /proc
        return None
    return choose_send_buffer(wmem_max, autotune_max)


def choose_send_buffer(wmem_max: int, autotune_max: int, wanted: int = _SEND_BUFFER) -> int | None:
    """`wanted` as far as `net.core.wmem_max` allows, when that beats autotuning: Linux
    doubles the value asked (for its bookkeeping) and stops autotuning that socket, so asking
    is only worth it when twice the granted size exceeds `net.ipv4.tcp_wmem`'s maximum. On a
    default kernel (wmem_max 208 KiB, tcp_wmem max 4 MiB) it is not, and nothing is set."""
    asked = min(wanted, wmem_max)
    return asked if 2 * asked > autotune_max else None


def _refuse(conn: h11.Connection, writer: asyncio.StreamWriter, status: int) -> None:
    """Answers a request h11 could not parse (400, 413, ...) when the state allows, then the
    caller closes the connection."""
    if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return
    headers = [("Content-Length", "0"), ("Connection", "close")]
    with contextlib.suppress(h11.LocalProtocolError):
        writer.write(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")


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
