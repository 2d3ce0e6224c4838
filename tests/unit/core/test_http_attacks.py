"""The HTTP listener against hostile clients (TARGETS.md S5), over real sockets on loopback.

Clients that never read a big answer, read it a trickle at a time, stall in the TLS handshake,
send ambiguous framing; and what a listener may not do to the process it runs in. Every wait is
a poll of an observable condition with a generous deadline, never a sleep; no duration is
asserted.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import socket
import ssl
import struct
import sys
import termios
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from otelgpu.confighttp.listener import MAX_CONNECTIONS, Listener, Request, Response
from otelgpu.confighttp.send_buffer import BODY_SLICE
from otelgpu.exporters.prometheus.render import Body
from otelgpu.exporters.prometheus.server import MetricsServer
from otelgpu.extensions.health_check.server import ProbeServer
from tests.peers.prometheus import self_signed_cert
from tests.peers.raw_http import raw

KiB = 1024
MiB = 1024 * KiB
BIG = bytes(range(256)) * (8 * MiB // 256)  # more than any kernel buffer on either side
MOST_ASKED = 64 * KiB  # the send buffer a connection may ask the kernel for (docs/prometheus.md)
DEADLINE = 30.0  # seconds any condition below is polled for before the test gives up


def _answer(request: Request) -> Response:
    return Response(200, BIG if request.path == "/big" else request.path.encode())


async def until(condition: Callable[[], bool], what: str) -> None:
    """Polls `condition` until it holds; fails after DEADLINE (a hung listener, not a slow one)."""
    give_up = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > give_up:
            pytest.fail(f"still waiting, after {DEADLINE:.0f} s, for {what}")
        await asyncio.sleep(0.01)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    listeners: list[Listener] = []

    async def start(**options: Any) -> Listener:
        listener = Listener(options.pop("handler", _answer), "127.0.0.1", 0, **options)
        await listener.start()
        listeners.append(listener)
        return listener

    yield start
    for listener in listeners:
        await listener.stop()


class Accepted:
    """The listener's side of accepted connections, as the sockets they were made of, and the
    SO_SNDBUF each asked for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, port: Callable[[], int]) -> None:
        self.sockets: dict[int, socket.socket] = {}
        self.asked: dict[int, int] = {}
        setsockopt = socket.socket.setsockopt

        def spy(sock: socket.socket, level: int, option: int, value: Any) -> None:
            if _local_port(sock) == port():
                self.sockets[id(sock)] = sock
                if (level, option) == (socket.SOL_SOCKET, socket.SO_SNDBUF):
                    self.asked[id(sock)] = value
            setsockopt(sock, level, option, value)

        monkeypatch.setattr(socket.socket, "setsockopt", spy)


def _local_port(sock: socket.socket) -> int | None:
    if sock.family != socket.AF_INET:
        return None
    try:
        return int(sock.getsockname()[1])
    except OSError:
        return None


def kernel_unsent(sock: socket.socket) -> int:
    """Bytes the kernel holds in this socket's send queue (SIOCOUTQ); 0 once it is closed."""
    try:
        queued = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
    except (OSError, ValueError):
        return 0
    return int(struct.unpack("i", queued)[0])


def non_reading_client(port: int) -> socket.socket:
    """Asks for the big answer and never reads (a small receive buffer on its side)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * KiB)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server ended this (non-blocking) client socket: FIN or reset."""
    try:
        return sock.recv(1 << 20) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def drain(sock: socket.socket) -> str:
    """Reads until the server ends the connection: 'reset' or 'closed' (blocking)."""
    sock.settimeout(DEADLINE)
    try:
        while sock.recv(1 << 20):
            pass
    except ConnectionResetError:
        return "reset"
    return "closed"


# --- a client that does not read what it asked for ------------------------------------------


async def test_clients_that_never_read_pin_a_small_bounded_kernel_buffer_each(
    serve: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """50 clients ask for an 8 MiB answer and never read. Each connection asks the kernel for
    the same small send buffer, whatever `net.core.wmem_max` would allow (a buffer sized for a
    whole body, on every connection, pinned hundreds of MB), so what the kernel holds for one
    is bounded by that buffer."""
    listener: Listener | None = None
    accepted = Accepted(monkeypatch, lambda: listener.port if listener else -1)
    listener = await serve(idle_timeout=120)
    clients = [non_reading_client(listener.port) for _ in range(50)]
    try:
        sockets = accepted.sockets.values
        await until(
            lambda: len(accepted.sockets) == 50 and all(kernel_unsent(s) > 0 for s in sockets()),
            "each of the 50 answers to be stuck in its connection's send queue",
        )
        held = [kernel_unsent(sock) for sock in sockets()]
        granted = [sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) for sock in sockets()]
    finally:
        for client in clients:
            client.close()
    assert len(accepted.asked) == 50 and max(accepted.asked.values()) <= MOST_ASKED
    assert max(granted) <= 2 * MOST_ASKED  # Linux doubles what is asked, for its bookkeeping
    # the send queue stops at the buffer (one more segment may be in flight past it)
    assert max(held) <= 2 * MOST_ASKED + 64 * KiB, held


async def test_a_client_that_does_not_read_its_answer_is_reset_after_the_write_timeout(
    serve: Callable[..., Any],
) -> None:
    """It asked and stopped: the connection ends write_timeout after the answer began, by a
    reset, so the kernel drops what it still held for it instead of keeping it for a closed
    socket."""
    listener = await serve(idle_timeout=120, write_timeout=0.3)
    client = non_reading_client(listener.port)
    try:
        await until(lambda: listener.connections == 1, "the connection to be counted")
        await until(lambda: listener.connections == 0, "the write timeout to close it")
        assert await asyncio.to_thread(drain, client) == "reset"
    finally:
        client.close()


async def test_a_client_that_reads_a_trickle_is_closed_after_the_write_timeout(
    serve: Callable[..., Any],
) -> None:
    """Reading a few bytes now and then keeps a per-read timer fresh forever; the write timeout
    is a deadline for the whole answer."""
    listener = await serve(idle_timeout=120, write_timeout=0.5)
    stop = threading.Event()

    def trickle() -> str:
        with socket.create_connection(("127.0.0.1", listener.port)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * KiB)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.settimeout(DEADLINE)
            while not stop.is_set():
                try:
                    if not sock.recv(1024):
                        return "closed"
                except ConnectionResetError:
                    return "reset"
                time.sleep(0.02)  # the client's pace, not a synchronisation
            return "still open"

    reader = asyncio.create_task(asyncio.to_thread(trickle))
    try:
        await until(lambda: reader.done(), "the trickling client to be ended")
    finally:
        stop.set()
    assert await reader in ("reset", "closed")


async def test_an_answer_that_closes_its_connection_ends_it_once_without_a_traceback(
    serve: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A big answer with `Connection: close` whose last slice (100 bytes here) leaves whole
    from the transport's `resume_writing`: closing there made asyncio end the connection
    twice, logging an `_call_connection_lost` traceback for every such scrape."""
    body = bytes(4 * BODY_SLICE + 100)
    listener = await serve(handler=lambda request: Response(200, body))
    caplog.set_level(logging.ERROR)
    request = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    for _ in range(5):
        got = await asyncio.to_thread(raw, listener.port, request, timeout=DEADLINE)
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"\r\n\r\n" + body)
    await listener.stop()  # its loop runs what was scheduled before it stops
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


# --- TLS handshakes -------------------------------------------------------------------------


@pytest.fixture
def tls(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context and a client context that trusts it."""
    cert, key = self_signed_cert(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


def tls_get(port: int, context: ssl.SSLContext, path: str = "/real") -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as plain,
        context.wrap_socket(plain, server_hostname="localhost") as sock,
    ):
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def finished_with_request(port: int, context: ssl.SSLContext, request: bytes) -> bytes:
    """A TLS 1.3 client whose handshake's last flight and first request leave in one write, so
    that the server reads them at once; returns the plaintext answer."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                incoming.write(sock.recv(65536))
        tls.write(request)
        sock.sendall(outgoing.read())  # the client's Finished and the request together
        answer = b""
        while True:
            try:
                chunk = tls.read(65536)
            except ssl.SSLWantReadError:
                more = sock.recv(65536)
                if not more:
                    return answer
                incoming.write(more)
                continue
            except ssl.SSLZeroReturnError:
                return answer
            if not chunk:
                return answer
            answer += chunk


async def test_a_request_that_comes_with_the_end_of_the_handshake_is_answered_over_tls(
    serve: Callable[..., Any], tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    server_context, client_context = tls
    listener = await serve(ssl_context=server_context)
    request = b"GET /early HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    for _ in range(3):
        got = await asyncio.to_thread(finished_with_request, listener.port, client_context, request)
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"/early")


async def test_stalled_tls_handshakes_count_toward_the_connection_cap(
    serve: Callable[..., Any], tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    """40 clients connect and never send a ClientHello, against a cap of 8: the cap holds
    them too (the oldest are closed as new ones come), and a real scrape is served."""
    server_context, client_context = tls
    listener = await serve(ssl_context=server_context, max_connections=8, idle_timeout=120)
    stalled = []
    for _ in range(40):
        sock = socket.create_connection(("127.0.0.1", listener.port))
        sock.setblocking(False)
        stalled.append(sock)
    try:
        await until(
            lambda: sum(closed_by_server(s) for s in stalled) >= 32,
            "the 32 oldest stalled handshakes to be closed",
        )
        await until(lambda: listener.connections == 8, "8 handshakes counted")
        got = await asyncio.to_thread(tls_get, listener.port, client_context)
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"/real")
        assert listener.connections <= 8
    finally:
        for sock in stalled:
            sock.close()


class KeepAlive:
    """One keep-alive connection, plain or TLS, asking its requests one after the other on the
    same socket (blocking; run it off the test's loop)."""

    def __init__(self, port: int, context: ssl.SSLContext | None = None) -> None:
        plain = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.sock = context.wrap_socket(plain, server_hostname="localhost") if context else plain

    def get(self, path: str = "/real") -> bytes:
        """The status line and body of one answer; raises OSError once the server ended the
        connection."""
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the server closed the keep-alive connection")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(body) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the server closed the keep-alive connection")
            body += chunk
        return head.split(b"\r\n")[0] + b" " + body

    def close(self) -> None:
        self.sock.close()


class Stalled:
    """Clients that connect and never send a byte (a TLS handshake that never starts, or a
    plain connection that never asks), and which of them the server has ended."""

    def __init__(self, port: int, n: int) -> None:
        self.socks = []
        for _ in range(n):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setblocking(False)
            self.socks.append(sock)
        self._ended: set[int] = set()

    def ended(self) -> int:
        for n, sock in enumerate(self.socks):
            if n not in self._ended and closed_by_server(sock):
                self._ended.add(n)
        return len(self._ended)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


async def test_stalled_handshakes_beyond_the_cap_never_evict_an_established_scraper(
    serve: Callable[..., Any], tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    """A scraper served once over TLS keeps its keep-alive connection while MAX_CONNECTIONS +
    20 handshakes that never finish arrive: the newcomers close the oldest stalled handshakes,
    never the established connection (before, it was the first one closed)."""
    server_context, client_context = tls
    listener = await serve(ssl_context=server_context, idle_timeout=120)
    scraper = await asyncio.to_thread(KeepAlive, listener.port, client_context)
    stalled: Stalled | None = None
    try:
        assert await asyncio.to_thread(scraper.get) == b"HTTP/1.1 200 OK /real"
        flood = MAX_CONNECTIONS + 20
        stalled = Stalled(listener.port, flood)
        over = flood - (MAX_CONNECTIONS - 1)  # what the cap leaves no room for
        await until(lambda: stalled.ended() >= over - 1, "the oldest stalled handshakes to end")
        await until(lambda: listener.connections == MAX_CONNECTIONS, "the cap to be reached")
        assert await asyncio.to_thread(scraper.get) == b"HTTP/1.1 200 OK /real"
        await until(lambda: stalled.ended() == over, f"{over} stalled handshakes to end")
        assert listener.connections == MAX_CONNECTIONS
    finally:
        scraper.close()
        if stalled is not None:
            stalled.close()


async def test_when_every_connection_is_established_a_newcomer_is_closed(
    serve: Callable[..., Any],
) -> None:
    """At the cap with nothing unproven to close, the newcomer is the one closed, and the
    established connections go on being answered."""
    listener = await serve(max_connections=2, idle_timeout=120)
    scrapers = [await asyncio.to_thread(KeepAlive, listener.port) for _ in range(2)]
    try:
        for scraper in scrapers:
            assert await asyncio.to_thread(scraper.get) == b"HTTP/1.1 200 OK /real"
        with socket.create_connection(("127.0.0.1", listener.port)) as newcomer:
            assert await asyncio.to_thread(drain, newcomer) in ("closed", "reset")
        for scraper in scrapers:
            assert await asyncio.to_thread(scraper.get) == b"HTTP/1.1 200 OK /real"
        assert listener.connections == 2
    finally:
        for scraper in scrapers:
            scraper.close()


async def test_an_answer_that_does_not_establish_leaves_its_connection_evictable(
    serve: Callable[..., Any],
) -> None:
    """A connection answered only refusals (4xx) or answers marked not to establish (a
    `/health` anyone may ask beside a password-protected `/metrics`) is still unproven: a
    newcomer at the cap closes it."""

    def answer(request: Request) -> Response:
        if request.path == "/open":
            return Response(200, b"open", establishes=False)
        status = {"/denied": 401, "/bad": 400}.get(request.path, 200)
        return Response(status, request.path.encode())

    listener = await serve(handler=answer, max_connections=2, idle_timeout=120)
    kept = await asyncio.to_thread(KeepAlive, listener.port)
    evicted = await asyncio.to_thread(KeepAlive, listener.port)
    try:
        assert await asyncio.to_thread(kept.get, "/real") == b"HTTP/1.1 200 OK /real"
        assert await asyncio.to_thread(evicted.get, "/open") == b"HTTP/1.1 200 OK open"
        assert (
            await asyncio.to_thread(evicted.get, "/denied") == b"HTTP/1.1 401 Unauthorized /denied"
        )
        assert await asyncio.to_thread(evicted.get, "/bad") == b"HTTP/1.1 400 Bad Request /bad"
        newcomer = await asyncio.to_thread(KeepAlive, listener.port)
        try:
            assert await asyncio.to_thread(newcomer.get) == b"HTTP/1.1 200 OK /real"
            assert await asyncio.to_thread(drain, evicted.sock) in ("closed", "reset")
            assert await asyncio.to_thread(kept.get) == b"HTTP/1.1 200 OK /real"
        finally:
            newcomer.close()
    finally:
        kept.close()
        evicted.close()


async def test_a_head_trickled_past_the_header_timeout_is_dropped(
    serve: Callable[..., Any],
) -> None:
    """A slowloris: a byte of its head every 50 ms, each well inside the idle timeout, never
    finishing. The head's deadline runs from its first byte and progress does not move it
    (before, each byte restarted the idle timer and the connection lived for ever)."""
    listener = await serve(idle_timeout=1.0, header_timeout=0.3)

    def trickle() -> str:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=DEADLINE) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            sock.setblocking(False)
            give_up = time.monotonic() + DEADLINE
            while time.monotonic() < give_up:
                if closed_by_server(sock):
                    return "dropped"
                try:
                    sock.send(b"X")
                except (BrokenPipeError, ConnectionResetError):
                    return "dropped"
                time.sleep(0.05)  # the client's pace, well under idle_timeout
            return "still open"

    assert await asyncio.to_thread(trickle) == "dropped"
    await until(lambda: listener.connections == 0, "the slowloris to be uncounted")


async def test_a_stalled_handshake_is_closed_after_the_handshake_timeout(
    serve: Callable[..., Any], tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    server_context, client_context = tls
    listener = await serve(ssl_context=server_context, idle_timeout=120, handshake_timeout=0.2)
    with socket.create_connection(("127.0.0.1", listener.port)) as sock:
        assert await asyncio.to_thread(drain, sock) in ("closed", "reset")
    await until(lambda: listener.connections == 0, "the stalled connection to be uncounted")
    got = await asyncio.to_thread(tls_get, listener.port, client_context)
    assert got.startswith(b"HTTP/1.1 200")


async def test_a_failed_handshake_is_uncounted_and_logs_nothing(
    serve: Callable[..., Any],
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server_context, _ = tls
    caplog.set_level(logging.WARNING)
    listener = await serve(ssl_context=server_context)
    got = await asyncio.to_thread(raw, listener.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert not got.startswith(b"HTTP/1.1")  # plain HTTP to a TLS port: no answer
    await until(lambda: listener.connections == 0, "the failed handshake to be uncounted")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# --- framing (RFC 9112 section 6.3) ---------------------------------------------------------

_NEXT = b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize(
    "request_head",
    [
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n",
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n",
    ],
    ids=["cl-then-te", "te-then-cl", "two-equal-cl", "two-different-cl", "cl-list"],
)
async def test_ambiguous_framing_is_refused_and_the_connection_closed(
    serve: Callable[..., Any], request_head: bytes
) -> None:
    """Whatever a proxy in front made of these bytes, the request after them must not be
    answered on this connection: 400, then the close."""
    listener = await serve()
    got = await asyncio.to_thread(raw, listener.port, request_head + b"0\r\n\r\n" + _NEXT)
    assert got.startswith(b"HTTP/1.1 400")
    assert got.count(b"HTTP/1.1 ") == 1 and b"/next" not in got
    assert b"connection: close" in got.lower()


@pytest.mark.parametrize(
    "request_head",
    [
        b"GET /a HTTP/1.1\r\n\r\n",
        b"GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        b"GET /a HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n",
    ],
    ids=["no-host", "two-hosts", "two-hosts-http-1.0"],
)
async def test_a_request_without_one_host_is_refused(
    serve: Callable[..., Any], request_head: bytes
) -> None:
    listener = await serve()
    got = await asyncio.to_thread(raw, listener.port, request_head + _NEXT)
    assert got.startswith(b"HTTP/1.1 400") and b"/next" not in got


async def test_an_http_1_0_request_is_answered_and_closed(serve: Callable[..., Any]) -> None:
    listener = await serve()
    got = await asyncio.to_thread(raw, listener.port, b"GET /old HTTP/1.0\r\n\r\n" + _NEXT)
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"/old")
    assert b"connection: close" in got.lower()


async def test_a_head_that_grows_over_many_reads_is_refused(serve: Callable[..., Any]) -> None:
    """One header line sent a few KiB at a time: the parser keeps an unfinished line, so the
    bytes of a head still incomplete are bounded too, not only those of a complete one."""
    listener = await serve()

    def grow() -> bytes:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=DEADLINE) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: ")
            try:
                for _ in range(64):  # 256 KiB in all, far past the 16 KiB limit
                    sock.sendall(b"a" * 4096)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused already
            return sock.recv(65536)

    got = await asyncio.to_thread(grow)
    assert got.startswith(b"HTTP/1.1 431")


async def test_deep_pipelining_is_answered_in_part_then_closed(serve: Callable[..., Any]) -> None:
    """A thousand requests in one write are not all parsed and held: the first ones are
    answered, the last of those says `Connection: close`, and the rest are not read."""
    listener = await serve()
    requests = b"".join(b"GET /%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(1000))
    got = await asyncio.to_thread(raw, listener.port, requests)
    answered = got.count(b"HTTP/1.1 200")
    assert 1 <= answered < 1000
    assert got.lower().count(b"connection: close") == 1 and got.endswith(b"/%d" % (answered - 1))


# --- process-wide state ---------------------------------------------------------------------


@pytest.fixture
def process_state() -> Iterator[Callable[[], tuple[object, ...]]]:
    """What a component must leave as it found it: the switch interval and the logging setup
    of the `asyncio` and root loggers (restored after the test whatever happened)."""
    saved_interval = sys.getswitchinterval()
    loggers = [logging.getLogger("asyncio"), logging.getLogger()]
    saved = [(list(lg.filters), list(lg.handlers), lg.level) for lg in loggers]

    def snapshot() -> tuple[object, ...]:
        return (
            sys.getswitchinterval(),
            *[(tuple(lg.filters), tuple(lg.handlers), lg.level) for lg in loggers],
        )

    sys.setswitchinterval(0.005)
    yield snapshot
    sys.setswitchinterval(saved_interval)
    for lg, (filters, handlers, level) in zip(loggers, saved, strict=True):
        lg.filters[:] = filters
        lg.handlers[:] = handlers
        lg.setLevel(level)


async def test_http_servers_change_no_process_wide_state(
    process_state: Callable[[], tuple[object, ...]],
) -> None:
    before = process_state()
    body = Body(b"up 1\n", b"", 1)
    servers = [
        Listener(_answer, "127.0.0.1", 0),
        MetricsServer(host="127.0.0.1", port=0, current=lambda: body, on_scrape=lambda *_: None),
        ProbeServer("127.0.0.1", 0, lambda: (True, [])),
    ]
    for server in servers:
        await server.start()
        assert process_state() == before, type(server).__name__
    for server in servers:
        await server.stop()
    assert process_state() == before


async def test_accept_errors_are_logged_by_the_listener_once_a_minute(
    serve: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """What asyncio reports on the listener's own loop at each failed accept() under EMFILE
    becomes one line a minute, with no traceback, without touching the `asyncio` logger."""
    caplog.set_level(logging.ERROR)
    failed_accepts = [
        {
            "message": "socket.accept() out of system resource",
            "exception": OSError(24, "Too many open files"),
        }
        for _ in range(1000)
    ]
    await _reported_on_its_loop(await serve(), failed_accepts)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "Too many open files" in lines[0]
    assert all(r.exc_info is None for r in caplog.records)


async def test_other_errors_on_the_listener_s_loop_are_logged_by_asyncio_as_usual(
    serve: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Only accept failures are the listener's own line: anything else its loop reports (a
    callback that raised) reaches the `asyncio` logger with its traceback, every time."""
    caplog.set_level(logging.ERROR)
    callbacks_failed = [
        {"message": f"a callback failed ({n})", "exception": ValueError("broken")} for n in range(2)
    ]
    await _reported_on_its_loop(await serve(), callbacks_failed)
    records = [r for r in caplog.records if r.name == "asyncio"]
    assert [r.getMessage() for r in records] == ["a callback failed (0)", "a callback failed (1)"]
    assert all(r.exc_info is not None for r in records)


async def _reported_on_its_loop(listener: Listener, contexts: list[dict[str, Any]]) -> None:
    """Each of `contexts` handed, in order, to the exception handler of `listener`'s own loop,
    on that loop (as asyncio reports there); returns once all were."""
    loop = listener.loop
    assert loop is not None
    reported = threading.Event()

    def report() -> None:
        for context in contexts:
            loop.call_exception_handler(context)
        reported.set()

    loop.call_soon_threadsafe(report)
    assert await asyncio.to_thread(reported.wait, DEADLINE)
