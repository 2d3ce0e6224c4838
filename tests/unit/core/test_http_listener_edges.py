"""The listener's edges, written against the mutants of `otelgpu/confighttp/listener.py` that the
serving tests let live: keep-alive on one socket, flow control with pipelined big answers,
timers, cancellation, eviction, restarts, odd bytes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

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


async def test_odd_bytes_in_the_path_get_an_answer_not_a_dropped_connection(
    server: Listener,
) -> None:
    got = await asyncio.to_thread(
        raw, server.port, b"GET /caf\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert got.startswith(b"HTTP/1.1 400")  # refused: an answer, then the close


async def test_request_bodies_are_counted_per_request_not_per_connection(
    server: Listener,
) -> None:
    body = b"p" * (30 * 1024)  # three of them are over the 64 KiB limit of one
    post = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    last = b"POST /p HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"
    got = await asyncio.to_thread(raw, server.port, post * 3 + last)
    assert got.count(b"HTTP/1.1 200") == 4 and b"413" not in got


async def test_a_complete_head_just_over_16_kib_is_refused_target_or_headers() -> None:
    ok = Response(200, b"ok")
    long_target = b"GET /" + b"t" * 17_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    long_header = b"GET / HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 17_000 + b"\r\n\r\n"
    for head in (long_target, long_header):  # one segment on loopback: a complete event
        assert (await exchange(lambda request: ok, head)).startswith(b"HTTP/1.1 431"), head[:20]


async def test_a_request_cut_short_by_the_client_gets_400() -> None:
    got = await exchange(_by_path, b"GET / HTTP/1.1\r\nHost", half_close=True)
    assert got.startswith(b"HTTP/1.1 400")


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
    cert, key = self_signed_cert(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    paths = _Paths()
    listener = Listener(paths, "127.0.0.1", 0, ssl_context=server_context, idle_timeout=5)
    await listener.start()
    client_context = ssl.create_default_context(cafile=str(cert))

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
