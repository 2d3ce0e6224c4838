"""The listener's edges (`otelgpu/confighttp/listener.py` and `connection.py`): keep-alive on one
socket, flow control with pipelined big answers, timers, cancellation, eviction and the default
connection cap, the listener's thread and loop from start to stop, restarts, odd bytes, refusals
and the lingering close after them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from otelgpu.confighttp import connection
from otelgpu.confighttp.listener import Listener, Request, Response
from tests.peers.prometheus import self_signed_cert
from tests.peers.raw_http import raw
from tests.unit.core.test_http_listener import exchange

BIG = b"b" * (12 * 1024 * 1024)  # more than both sides' kernel buffers hold


def _by_path(request: Request) -> Response:
    return Response(200, BIG if request.path == "/big" else request.path.encode())


class _Paths:
    """`_by_path`, telling when it was first asked for `/big`."""

    def __init__(self) -> None:
        self.big = threading.Event()

    def __call__(self, request: Request) -> Response:
        if request.path == "/big":
            self.big.set()
        return _by_path(request)


@pytest.fixture
def paths() -> _Paths:
    return _Paths()


@pytest.fixture
async def server(paths: _Paths) -> AsyncIterator[Listener]:
    listener = Listener(paths, "127.0.0.1", 0, idle_timeout=2)
    await listener.start()
    yield listener
    await listener.stop()


def _full(listener: Listener, paths: _Paths) -> None:
    """Blocks (in a client's thread) until the server has met a full socket: it was asked for
    `/big`, and its loop has finished the call that answered, which writes until the kernel
    takes no more and writing pauses (12 MiB never fit, and the client has not read yet)."""
    assert paths.big.wait(10), "the server was never asked for /big"
    loop = listener.loop
    assert loop is not None
    turned = threading.Event()
    loop.call_soon_threadsafe(turned.set)  # runs after the callback that is answering
    assert turned.wait(10)


async def until(condition: Callable[[], bool], what: str) -> None:
    """Waits until `condition()` holds, polling it; fails after 10 s."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def _read_answer(sock: socket.socket) -> bytes:
    """One answer with a Content-Length, read off a keep-alive socket (ConnectionError when
    the server closes before it is whole)."""
    data = bytearray()
    while b"\r\n\r\n" not in data:
        data += _more(sock)
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    body = bytearray(rest)
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += _more(sock)
    return head + b"\r\n\r\n" + bytes(body)


def _more(sock: socket.socket) -> bytes:
    chunk = sock.recv(1 << 20)
    if not chunk:
        raise ConnectionError("the server closed before the answer was whole")
    return chunk


def _ok(request: Request) -> Response:
    return Response(200, request.path.encode())


async def test_two_requests_one_after_the_other_share_one_connection(server: Listener) -> None:
    def ask_twice() -> list[bytes]:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            answers = []
            for path in (b"/one", b"/two"):
                sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
                answers.append(_read_answer(sock))
            return answers

    first, second = await asyncio.to_thread(ask_twice)
    assert first.endswith(b"/one") and second.endswith(b"/two")  # no reconnect in between


async def test_pipelined_big_answers_to_a_slow_reader_all_arrive(
    server: Listener, paths: _Paths
) -> None:
    """The first answer fills the socket: writing pauses, reading with it; once the client
    reads, both resume and the requests behind it are answered."""

    def ask() -> bytes:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(
                b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * 2
                + b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            _full(server, paths)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    got = await asyncio.to_thread(ask)
    assert got.count(b"HTTP/1.1 200") == 3 and got.endswith(b"/last")
    assert len(got) > 2 * len(BIG)


async def test_a_head_that_trickles_in_keeps_its_connection() -> None:
    listener = Listener(_by_path, "127.0.0.1", 0, idle_timeout=0.6)
    await listener.start()

    def trickle() -> bytes:
        request = b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
            # The client's pace, not a synchronisation: 11 pieces, 0.15 s apart (well inside
            # the idle timeout, however loaded the machine), ~1.6 s in all (well past it).
            for i in range(0, len(request), 5):
                sock.sendall(request[i : i + 5])
                time.sleep(0.15)
            return sock.recv(65536)

    try:
        got = await asyncio.to_thread(trickle)
    finally:
        await listener.stop()
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"/slow")


async def test_an_awaited_answer_longer_than_the_idle_timeout_still_arrives() -> None:
    async def slow(request: Request) -> Response:
        await asyncio.sleep(0.8)  # a bcrypt check queued behind others
        return Response(200, b"checked")

    listener = Listener(slow, "127.0.0.1", 0, idle_timeout=0.3)
    await listener.start()
    try:
        got = await asyncio.to_thread(
            raw, listener.port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
    finally:
        await listener.stop()
    assert got.endswith(b"checked")


async def test_an_awaited_answer_to_a_request_read_in_two_parts_outlives_the_header_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The header timeout bounds a request until it is whole, not its answer: once the last
    part is read and the answer is awaited, the idle timeout applies (and is renewed while the
    handler works). The second part is sent once the listener has read the first (two reads,
    whatever the load), and the handler answers only after the request's header deadline has
    passed on the listener's clock (the loop runs its timers in time order)."""
    header_timeout = 2.0  # room for the client to send the second part, however loaded
    first_read: list[float] = []  # the listener's clock at its first read: the deadline's start
    read = threading.Event()
    data_received = connection.Connection.data_received

    def noting(self: connection.Connection, data: bytes) -> None:
        if not first_read:
            first_read.append(asyncio.get_running_loop().time())
        data_received(self, data)
        read.set()

    monkeypatch.setattr(connection.Connection, "data_received", noting)

    async def slow(request: Request) -> Response:  # a bcrypt check queued behind others
        loop = asyncio.get_running_loop()
        await asyncio.sleep(first_read[0] + header_timeout + 0.1 - loop.time())
        return Response(200, b"checked")

    listener = Listener(slow, "127.0.0.1", 0, idle_timeout=30, header_timeout=header_timeout)
    await listener.start()

    def in_two_parts() -> bytes:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=30) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            assert read.wait(30), "the listener never read the first part"
            sock.sendall(b"Connection: close\r\n\r\n")
            return _until_closed(sock)

    try:
        got = await asyncio.to_thread(in_two_parts)
    finally:
        await listener.stop()
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"checked")


async def test_stop_with_an_answer_awaited_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    awaited = threading.Event()

    async def forever(request: Request) -> Response:
        awaited.set()
        await asyncio.Event().wait()  # never set
        return Response(200, b"never")

    caplog.set_level(logging.DEBUG)
    listener = Listener(forever, "127.0.0.1", 0)
    await listener.start()
    with socket.create_connection(("127.0.0.1", listener.port)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await asyncio.to_thread(awaited.wait, 10)  # the answer is being awaited
        await listener.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [t for t in threading.enumerate() if t.name == "otelgpu http"]  # joined


async def test_stop_returns_once_an_awaited_answer_s_handler_has_ended() -> None:
    """A handler awaiting its answer at the stop (a bcrypt check in line) is cancelled and
    runs to its end, its clean-up included, before `stop` returns."""
    awaited, ended = threading.Event(), threading.Event()

    async def check(request: Request) -> Response:
        awaited.set()
        try:
            await asyncio.Event().wait()  # never set
        finally:
            ended.set()  # (a place in the check's line given back)
        return Response(200)

    listener = Listener(check, "127.0.0.1", 0)
    await listener.start()
    with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await asyncio.to_thread(awaited.wait, 10)
        await listener.stop()
        assert ended.is_set()
    assert listener.connections == 0


async def test_stop_closes_every_connection_and_its_thread_ends_without_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    awaited = threading.Event()

    async def check(request: Request) -> Response:  # an answer still awaited at the stop
        awaited.set()
        await asyncio.Event().wait()
        return Response(200)

    listener = Listener(check, "127.0.0.1", 0)
    await listener.start()
    idle = socket.create_connection(("127.0.0.1", listener.port), timeout=10)
    asking = socket.create_connection(("127.0.0.1", listener.port), timeout=10)
    try:
        asking.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await asyncio.to_thread(awaited.wait, 10)
        await until(lambda: listener.connections == 2, "both connections accepted")
        await listener.stop()
        for sock in (idle, asking):
            assert await asyncio.to_thread(_ended, sock)
    finally:
        idle.close()
        asking.close()
    assert errors == []


def _ended(sock: socket.socket) -> bool:
    """Whether the server ended the connection (a close or a reset) before `sock`'s timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


async def test_the_oldest_connection_is_closed_when_one_too_many_opens() -> None:
    listener = Listener(_by_path, "127.0.0.1", 0, max_connections=2)
    await listener.start()
    socks = []
    try:
        for _ in range(2):
            socks.append(socket.create_connection(("127.0.0.1", listener.port), timeout=5))
            await until(lambda: listener.connections == len(socks), "the connection accepted")
        # One too many: its accept shows as the oldest one's close.
        socks.append(socket.create_connection(("127.0.0.1", listener.port), timeout=5))

        def closed(sock: socket.socket) -> bool:
            try:
                return sock.recv(1) == b""
            except ConnectionResetError:
                return True

        assert await asyncio.to_thread(closed, socks[0])  # the oldest, not a newer one
        assert listener.connections == 2
        socks[2].sendall(b"GET /new HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await asyncio.to_thread(_read_answer, socks[2])).endswith(b"/new")
    finally:
        for sock in socks:
            sock.close()
        await listener.stop()


async def test_a_listener_holds_256_connections_by_default_then_closes_the_oldest() -> None:
    listener = Listener(_ok, "127.0.0.1", 0)
    await listener.start()
    socks: list[socket.socket] = []
    try:
        for _ in range(256):
            socks.append(socket.create_connection(("127.0.0.1", listener.port), timeout=10))
        await until(lambda: listener.connections == 256, "256 connections accepted")
        socks.append(socket.create_connection(("127.0.0.1", listener.port), timeout=10))
        assert await asyncio.to_thread(socks[0].recv, 1) == b""  # the oldest one, closed
        assert listener.connections == 256
    finally:
        for sock in socks:
            sock.close()
        await listener.stop()


async def test_a_handler_error_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(request: Request) -> Response:
        raise RuntimeError("the bug")

    caplog.set_level(logging.ERROR, logger="otelgpu.http")
    got = await exchange(broken, b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 500") and b"content-type: text/plain" in got.lower()
    (record,) = [r for r in caplog.records if r.name == "otelgpu.http"]
    assert "answering GET /x failed" in record.getMessage()
    assert record.exc_info is not None and "the bug" in str(record.exc_info[1])


async def test_an_answer_that_cannot_be_sent_drops_the_connection_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="otelgpu.http")
    text_body = Response(200, "not bytes")  # type: ignore[arg-type]
    got = await exchange(lambda request: text_body, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert got == b""
    assert [r for r in caplog.records if "HTTP connection failed" in r.getMessage()]


def _answering(status: int) -> Callable[[Request], Response]:
    return lambda request: Response(status)


async def test_an_answer_with_a_status_that_is_not_3_digits_is_not_sent_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="otelgpu.http")
    ask = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    for status in (99, 1000):
        assert await exchange(_answering(status), ask) == b"", status  # the connection dropped
    logged = [str(r.exc_info[1]) for r in caplog.records if r.exc_info is not None]
    assert [text for text in logged if text.startswith("status 99 ")]
    assert [text for text in logged if text.startswith("status 1000 ")]
    for status in (100, 999):  # the bounds are statuses
        got = await exchange(_answering(status), ask)
        assert got.startswith(b"HTTP/1.1 %d " % status), status


async def test_odd_bytes_in_the_path_get_an_answer_not_a_dropped_connection(
    server: Listener,
) -> None:
    got = await asyncio.to_thread(
        raw, server.port, b"GET /caf\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert got.startswith(b"HTTP/1.1 400")  # refused: an answer, then the close


async def test_empty_lines_before_a_request_are_ignored_however_many() -> None:
    """RFC 9112 section 2.2: a server ignores empty lines before a request line. A kilobyte of
    them fills a whole piece of what is read, with no request begun in it."""
    request = b"\r\n" * 1024 + b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    got = await exchange(_ok, request)
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"/after")


async def test_request_bodies_are_counted_per_request_not_per_connection(
    server: Listener,
) -> None:
    body = b"p" * (30 * 1024)  # three of them are over the 64 KiB limit of one
    post = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    last = b"POST /p HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"
    got = await asyncio.to_thread(raw, server.port, post * 3 + last)
    assert got.count(b"HTTP/1.1 200") == 4 and b"413" not in got


async def test_sixteen_pipelined_requests_are_parsed_ahead_the_sixteenth_closes() -> None:
    requests = b"".join(b"GET /%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(20))
    got = await exchange(_ok, requests)  # ~600 bytes: one read
    assert got.count(b"HTTP/1.1 200") == 16 and got.endswith(b"/15")
    assert got.lower().count(b"connection: close") == 1


async def test_a_complete_head_just_over_16_kib_is_refused_target_or_headers() -> None:
    ok = Response(200, b"ok")
    long_target = b"GET /" + b"t" * 17_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    long_header = b"GET / HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 17_000 + b"\r\n\r\n"
    for head in (long_target, long_header):  # one segment on loopback: a complete event
        assert (await exchange(lambda request: ok, head)).startswith(b"HTTP/1.1 431"), head[:20]


def _until_closed(sock: socket.socket) -> bytes:
    """Everything read until the server's end of the connection (blocking)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


async def test_a_refused_client_still_sending_reads_the_refusal_and_is_not_reset() -> None:
    """A lingering close: after a 413 our side ends (FIN) and what the client goes on sending
    is read and dropped, for up to 2 s, instead of a reset that could destroy the answer."""
    listener = Listener(_ok, "127.0.0.1", 0)
    await listener.start()

    def refused() -> bytes:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as sock:
            head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (64 << 20)
            sock.sendall(head + b"p" * (192 * 1024))  # refused past 64 KiB
            answer = _until_closed(sock)  # the answer, then our side's end
            sock.sendall(b"p" * (8 << 20))  # more than any send buffer: it must be read
            return answer

    try:
        got = await asyncio.to_thread(refused)
    finally:
        await listener.stop()
    assert got.startswith(b"HTTP/1.1 413") and b"connection: close" in got.lower()


async def test_a_request_cut_short_by_the_client_gets_400() -> None:
    got = await exchange(_by_path, b"GET / HTTP/1.1\r\nHost", half_close=True)
    assert got.startswith(b"HTTP/1.1 400")


async def _over_tls(
    tmp_path: Path, handler: Callable[[Request], Response], idle_timeout: float
) -> tuple[Listener, ssl.SSLContext]:
    """A started listener serving `handler` over TLS with a new self-signed certificate, and a
    client context that trusts it."""
    cert, key = self_signed_cert(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    listener = Listener(
        handler, "127.0.0.1", 0, ssl_context=server_context, idle_timeout=idle_timeout
    )
    await listener.start()
    return listener, ssl.create_default_context(cafile=str(cert))


async def test_a_refusal_over_tls_is_answered_then_the_connection_closed(tmp_path: Path) -> None:
    listener, client_context = await _over_tls(tmp_path, _ok, idle_timeout=60)

    def refused() -> bytes:
        with (
            socket.create_connection(("127.0.0.1", listener.port), timeout=10) as raw_sock,
            client_context.wrap_socket(raw_sock, server_hostname="localhost") as sock,
        ):
            sock.sendall(b"GET / HTTP/1.1\r\n\r\n")  # no Host: 400
            return _until_closed(sock)  # closed at once, not after the idle timeout

    try:
        got = await asyncio.to_thread(refused)
    finally:
        await listener.stop()
    assert got.startswith(b"HTTP/1.1 400")


async def test_a_tls_connection_that_never_asks_is_closed_after_the_idle_timeout(
    tmp_path: Path,
) -> None:
    """The idle timeout starts once the handshake is done: a client that completes it and
    then sends nothing is closed, as a plain one is."""
    listener, client_context = await _over_tls(tmp_path, _ok, idle_timeout=0.3)

    def silent() -> bytes:
        with (
            socket.create_connection(("127.0.0.1", listener.port), timeout=20) as raw_sock,
            client_context.wrap_socket(raw_sock, server_hostname="localhost") as sock,
        ):
            return _until_closed(sock)  # the handshake is done; nothing is asked

    try:
        got = await asyncio.to_thread(silent)
        assert got == b""
        await until(lambda: listener.connections == 0, "the connection to be counted closed")
    finally:
        await listener.stop()


async def test_a_listener_restarts_on_its_port_at_once() -> None:
    """What a restart does: the connections it closed leave sockets in TIME_WAIT on its
    side, and the new bind must not fail on them."""
    first = Listener(_by_path, "127.0.0.1", 0)
    await first.start()
    port = first.port
    got = await asyncio.to_thread(
        raw, port, b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert got.endswith(b"/a")
    await first.stop()
    second = Listener(_by_path, "127.0.0.1", port)
    with contextlib.suppress(Exception):
        await second.start()
    try:
        assert second.port == port
        got = await asyncio.to_thread(
            raw, port, b"GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert got.endswith(b"/b")
    finally:
        await second.stop()


async def test_the_listener_s_loop_exists_only_while_its_thread_runs() -> None:
    listener = Listener(_ok, "127.0.0.1", 0)
    assert listener.loop is None  # not started
    await listener.start()
    running = listener.loop
    assert running is not None and not running.is_closed()
    await listener.stop()
    assert listener.loop is None and running.is_closed()


_LEFT_RUNNING = """
import asyncio
from otelgpu.confighttp.listener import Listener, Response

async def main():
    listener = Listener(lambda request: Response(200), "127.0.0.1", 0)
    await listener.start()
    print(listener.port, flush=True)

asyncio.run(main())  # returns with the listener still serving: never stopped
"""


def test_a_listener_never_stopped_does_not_keep_the_process_alive() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LEFT_RUNNING], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0  # it was serving when the process ended


async def test_start_on_an_address_in_use_raises_and_leaves_no_thread() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        listener = Listener(_ok, "127.0.0.1", taken.getsockname()[1], name="otelgpu http taken")
        with pytest.raises(OSError):
            await listener.start()
    assert not [t for t in threading.enumerate() if t.name == "otelgpu http taken"]
    assert listener.loop is None
    await listener.stop()  # already stopped: nothing to do


async def test_start_cancelled_during_the_bind_leaves_no_thread_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolving, resolve = threading.Event(), threading.Event()
    getaddrinfo = socket.getaddrinfo

    def held(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "localhost":  # the listener's bind, on its thread: held until released
            resolving.set()
            resolve.wait(10)
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", held)
    listener = Listener(_ok, "localhost", 0, name="otelgpu http cancelled")
    starting = asyncio.create_task(listener.start())
    assert await asyncio.to_thread(resolving.wait, 10)
    starting.cancel()
    resolve.set()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert not [t for t in threading.enumerate() if t.name == "otelgpu http cancelled"]


async def test_after_a_big_answer_read_slowly_the_next_request_is_read(
    server: Listener, paths: _Paths
) -> None:
    """Reading paused with writing must resume with it: the keep-alive's next request comes
    only after the client has read the big answer."""

    def ask() -> tuple[bytes, bytes]:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            _full(server, paths)  # writing (and reading) pause
            big = _read_answer(sock)
            sock.sendall(b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
            return big, _read_answer(sock)

    big, after = await asyncio.to_thread(ask)
    assert big.endswith(BIG[-100:]) and after.endswith(b"/after")


async def test_a_big_answer_then_close_arrives_whole_before_the_close(
    server: Listener, paths: _Paths
) -> None:
    """`Connection: close` on a big answer: all of it is sent before the connection ends."""

    def ask() -> bytes:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            _full(server, paths)
            chunks = []
            while chunk := sock.recv(1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)

    got = await asyncio.to_thread(ask)
    assert got.partition(b"\r\n\r\n")[2] == BIG


async def test_a_client_gone_in_the_middle_of_a_big_answer_leaves_the_listener_serving(
    server: Listener,
) -> None:
    """The rest of a big answer is dropped with its connection; the next client is served."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.recv(65536)
    await until(lambda: server.connections == 0, "the server let the connection go")
    answers = await asyncio.to_thread(
        raw, server.port, b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert answers.endswith(b"/next")


async def test_big_answers_over_tls_arrive_whole_on_one_connection(tmp_path: Path) -> None:
    """Under TLS the transport keeps asyncio's write limits (it pauses at size >= high, so the
    plain connection's 0 would never resume): the slices of two big answers still all arrive,
    in order, on one keep-alive connection read slowly."""
    paths = _Paths()
    listener, client_context = await _over_tls(tmp_path, paths, idle_timeout=5)

    def ask() -> list[bytes]:
        with (
            socket.create_connection(("127.0.0.1", listener.port), timeout=10) as raw_sock,
            client_context.wrap_socket(raw_sock, server_hostname="localhost") as sock,
        ):
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
            _full(listener, paths)
            return [_read_answer(sock), _read_answer(sock)]

    try:
        answers = await asyncio.to_thread(ask)
    finally:
        await listener.stop()
    assert [answer.partition(b"\r\n\r\n")[2] == BIG for answer in answers] == [True, True]
