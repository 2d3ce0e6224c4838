"""The listener and its connections, written against the mutants of
`otelgpu/confighttp/listener.py` and `connection.py` that the serving tests let live
(docs/dev/mutation.md): documented defaults, the listener's loop and thread, and connection
edges the other files do not reach."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from otelgpu.confighttp.listener import Listener, Request, Response
from tests.peers.prometheus import self_signed_cert
from tests.unit.core.test_http_listener import exchange
from tests.unit.core.test_http_listener_edges import until


def _ok(request: Request) -> Response:
    return Response(200, request.path.encode())


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


# --- connections ----------------------------------------------------------------------------


async def test_empty_lines_before_a_request_are_ignored_however_many() -> None:
    """RFC 9112 section 2.2: a server ignores empty lines before a request line. A kilobyte of
    them fills a whole piece of what is read, with no request begun in it."""
    request = b"\r\n" * 1024 + b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    got = await exchange(_ok, request)
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"/after")


async def test_sixteen_pipelined_requests_are_parsed_ahead_the_sixteenth_closes() -> None:
    requests = b"".join(b"GET /%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(20))
    got = await exchange(_ok, requests)  # ~600 bytes: one read
    assert got.count(b"HTTP/1.1 200") == 16 and got.endswith(b"/15")
    assert got.lower().count(b"connection: close") == 1


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


async def test_a_refusal_over_tls_is_answered_then_the_connection_closed(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    listener = Listener(_ok, "127.0.0.1", 0, ssl_context=server_context, idle_timeout=60)
    await listener.start()
    client_context = ssl.create_default_context(cafile=str(cert))

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
