"""The HTTP listener's serving path under a busy pipeline (P7).

A scrape takes the GIL back after every system call it makes, and each time may wait for the
pipeline thread to hand it over, so the serving path makes few calls: a ready answer is written
inside the read that brought its request, its head leaves with the first slice of its body,
and the rest of a big body goes to `send` as slices of the body object itself.

No timings are asserted: what is checked is which socket calls the serving thread makes, and
that answers complete while the pipeline's thread spins in Python holding the GIL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import http.client
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest

from otelgpu.confighttp import listener as http_listener
from otelgpu.confighttp import send_buffer as http_send_buffer
from otelgpu.confighttp.listener import Listener, Request, Response
from tests.peers.raw_http import raw

SMALL = b"x" * (100 * 1024)  # a 10k-series gzip body is ~170 kB
BIG = b"y" * (2 * 1024 * 1024)
MiB = 1024 * 1024


async def answer(request: Request) -> Response:
    return Response(200, BIG if request.path == "/big" else SMALL)


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    server = Listener(answer, "127.0.0.1", 0)
    await server.start()
    yield server
    await server.stop()


def fetch(port: int, *paths: str) -> list[bytes]:
    """GETs on one keep-alive connection (blocking: run it in a thread)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        bodies = []
        for path in paths:
            conn.request("GET", path)
            bodies.append(conn.getresponse().read())
        return bodies
    finally:
        conn.close()


class SocketCalls:
    """Records `send` / `setsockopt` calls made on the listener's side of connections: the
    bytes each `send` was handed, and what they were (`handed`: their type, their length and,
    for a memoryview, the object it views)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, port: int) -> None:
        self.sends: list[bytes] = []
        self.handed: list[tuple[type, int, object]] = []
        self.options: list[tuple[int, int, int]] = []
        send, setsockopt = socket.socket.send, socket.socket.setsockopt

        def spy_send(sock: socket.socket, data: Any, *args: Any) -> int:
            if self._ours(sock, port):
                self.sends.append(bytes(data))
                viewed = data.obj if isinstance(data, memoryview) else None
                self.handed.append((type(data), len(data), viewed))
            return send(sock, data, *args)

        def spy_setsockopt(sock: socket.socket, level: int, option: int, value: Any) -> None:
            if self._ours(sock, port):
                self.options.append((level, option, value))
            setsockopt(sock, level, option, value)

        monkeypatch.setattr(socket.socket, "send", spy_send)
        monkeypatch.setattr(socket.socket, "setsockopt", spy_setsockopt)

    @staticmethod
    def _ours(sock: socket.socket, port: int) -> bool:
        if sock.family != socket.AF_INET:  # e.g. the event loop's self-pipe
            return False
        try:
            return bool(sock.getsockname()[1] == port)
        except OSError:
            return False


async def test_accepted_connections_ask_for_the_small_fixed_send_buffer(
    listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = SocketCalls(monkeypatch, listener.port)
    assert await asyncio.to_thread(fetch, listener.port, "/") == [SMALL]
    asked = [value for _, option, value in calls.options if option == socket.SO_SNDBUF]
    assert asked == [http_send_buffer.SEND_BUFFER]


async def test_a_small_answer_leaves_in_one_send_a_big_one_is_not_copied(
    listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = SocketCalls(monkeypatch, listener.port)
    assert await asyncio.to_thread(fetch, listener.port, "/", "/big") == [SMALL, BIG]
    heads = [i for i, data in enumerate(calls.sends) if data.startswith(b"HTTP/1.1 200")]
    assert len(heads) == 2
    assert SMALL[:1000] in calls.sends[heads[0]]  # the small body went with its head
    assert BIG[:1000] in calls.sends[heads[1]]  # so did the first slice of the big one
    assert any(viewed is BIG for _, _, viewed in calls.handed)  # the rest as the body itself


async def test_a_big_answer_the_kernel_takes_in_parts_is_not_copied_whole() -> None:
    """asyncio's transport copies whatever one `send` did not take, twice (`data[n:]`, then
    into its bytearray): handed a whole 6 MB body, that is most of it per scrape, under the
    GIL. The body goes out in slices of itself instead, each handed to `send` once the one
    before has left, so at most one slice's rest is ever copied."""
    body = bytes(range(256)) * (6 * MiB // 256)  # a plain 10k-series body is ~6.4 MB
    server = Listener(lambda request: Response(200, body), "127.0.0.1", 0)
    await server.start()
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = SocketCalls(monkeypatch, server.port)

        def slow_reader() -> bytes:
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                got = bytearray()
                while b"\r\n\r\n" not in got or len(got) < got.index(b"\r\n\r\n") + 4 + len(body):
                    time.sleep(0.001)  # the kernel takes the body in parts
                    got += sock.recv(256 * 1024)
                return bytes(got)

        try:
            got = await asyncio.to_thread(slow_reader)
        finally:
            await server.stop()
    assert got.partition(b"\r\n\r\n")[2] == body
    step = http_send_buffer.BODY_SLICE
    # sends of a slice of the body itself, and sends from the transport's buffer (a copy)
    slices = [length for _, length, viewed in calls.handed if viewed is body]
    copies = [length for kind, length, _ in calls.handed if kind is bytearray]
    # after the first (sent with the head), every slice went to `send` itself, whole, the
    # next once the one before had left
    assert slices == [min(step, len(body) - start) for start in range(step, len(body), step)]
    assert copies and max(copies) <= step  # the kernel took them in parts: rests were copied


async def test_answers_complete_while_the_pipeline_thread_spins_holding_the_gil(
    listener: Listener,
) -> None:
    """The test's loop thread stands for the pipeline: a pure-Python loop, never awaiting,
    only ever giving the GIL up when the interpreter forces it. Every answer comes back."""
    done = threading.Event()
    bodies: list[bytes] = []

    def scrape() -> None:
        try:  # a listener that never answered ends this with the client's timeout
            bodies.extend(fetch(listener.port, *["/big", "/"] * 10))
        finally:
            done.set()

    client = threading.Thread(target=scrape)
    client.start()
    spins = 0
    while not done.is_set():  # never yields to this loop: only the listener's own can answer
        spins += 1
    client.join()
    assert bodies == [BIG, SMALL] * 10
    assert spins > 0  # the loop thread did run Python throughout


# --- answered where it was read -------------------------------------------------------------
# A ready answer (every /metrics and /health answer without a password) is written inside the
# `data_received` that read its request: answered from a task, it would wait for another turn
# of the listener's loop, a `select` that releases the GIL, one more hand-over per scrape to
# wait for while the pipeline computes (docs/dev/p7.md).


async def exchange(handler: http_listener.Handler, request: bytes, **how: bool) -> bytes:
    """What a listener serving `handler` answers to these raw bytes, until it closes."""
    server = Listener(handler, "127.0.0.1", 0)
    await server.start()
    try:
        return await asyncio.to_thread(raw, server.port, request, **how)
    finally:
        await server.stop()


async def test_a_ready_answer_is_given_inside_the_read_that_brought_its_request() -> None:
    seen: list[tuple[bool, int]] = []

    def ready(request: Request) -> Response:
        seen.append((asyncio.current_task() is None, threading.get_ident()))
        return Response(200, b"ok")

    got = await exchange(ready, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok")
    ((outside_any_task, thread),) = seen
    assert outside_any_task  # called from the protocol's callback, not from a task
    assert thread != threading.get_ident()  # on the listener's own thread


async def test_pipelined_requests_to_a_handler_that_awaits_are_answered_in_order() -> None:
    async def slow_first(request: Request) -> Response:
        if request.path == "/1":
            await asyncio.sleep(0.2)  # the second request is already there meanwhile
        return Response(200, request.path.encode())

    def mixed(request: Request) -> Response | Awaitable[Response]:
        return slow_first(request) if request.path == "/1" else Response(200, b"/2")

    got = await exchange(
        mixed,
        b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert got.count(b"HTTP/1.1 200") == 2
    assert got.index(b"\r\n\r\n/1") < got.index(b"\r\n\r\n/2")


async def test_a_failing_handler_answers_500_and_the_connection_goes_on() -> None:
    def broken(request: Request) -> Response:
        if request.path == "/bad":
            raise RuntimeError("bug")
        return Response(200, b"fine")

    async def broken_later(request: Request) -> Response:
        raise RuntimeError("bug, later")

    for handler in (broken, broken_later):
        got = await exchange(
            handler,
            b"GET /bad HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /bad HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        assert got.count(b"HTTP/1.1 500") == 2, handler


async def test_a_client_that_stops_reading_is_closed_after_the_write_timeout() -> None:
    server = Listener(answer, "127.0.0.1", 0, write_timeout=0.5)
    await server.start()
    try:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            # ask for the 2 MiB body 20 times and never read: the answers cannot all leave
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * 20)
            for _ in range(100):
                await asyncio.sleep(0.05)
                if server.connections == 0:
                    break
            assert server.connections == 0
        finally:
            sock.close()
    finally:
        await server.stop()


async def test_a_client_that_half_closes_after_its_request_still_gets_an_awaited_answer() -> None:
    async def later(request: Request) -> Response:
        await asyncio.sleep(0.1)  # the client's FIN arrives meanwhile
        return Response(200, b"late")

    got = await exchange(later, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", half_close=True)
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"late")


# --- reading paused with writing, called-off checks, bad answers, big heads ------------------


async def test_a_client_that_sends_but_never_reads_is_dropped_and_not_buffered() -> None:
    """It asked for a big answer and keeps writing: reading pauses with writing, so its bytes
    neither pile up in the parser's queue nor move the write timeout."""
    huge = b"z" * (20 * MiB)
    server = Listener(lambda request: Response(200, huge), "127.0.0.1", 0, write_timeout=0.5)
    await server.start()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        sock.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(40):  # 4 s: eight write timeouts
            with contextlib.suppress(BlockingIOError):  # its own buffer full: keep trying
                sock.send(b"X" * 65536)
            await asyncio.sleep(0.1)
            if server.connections == 0:
                break
        assert server.connections == 0
    finally:
        sock.close()
        await server.stop()


async def test_an_awaited_check_called_off_answers_503_and_the_connection_goes_on() -> None:
    """What `BasicAuthenticator.close()` does to checks still queued on a reload:
    `executor.shutdown(cancel_futures=True)`: an answer, and the connection goes on."""
    executor = concurrent.futures.ThreadPoolExecutor(1)
    started, release, submitted = threading.Event(), threading.Event(), threading.Event()
    executor.submit(lambda: (started.set(), release.wait(10)))  # a check in progress

    async def queued(request: Request) -> Response:
        check = asyncio.get_running_loop().run_in_executor(executor, time.sleep, 0)
        submitted.set()  # queued behind the check in progress
        await check
        return Response(200, b"checked")

    def handler(request: Request) -> Response | Awaitable[Response]:
        return queued(request) if request.path == "/metrics" else Response(200, b"next")

    server = Listener(handler, "127.0.0.1", 0, idle_timeout=5)
    await server.start()
    try:
        ask = asyncio.create_task(
            asyncio.to_thread(
                raw,
                server.port,
                b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
        )
        assert await asyncio.to_thread(started.wait, 5)
        assert await asyncio.to_thread(submitted.wait, 5)
        executor.shutdown(wait=False, cancel_futures=True)  # the queued check is called off
        release.set()
        got = await ask
        await asyncio.to_thread(executor.shutdown)  # the worker thread joined
    finally:
        await server.stop()
    assert got.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in got.lower()
    assert got.endswith(b"next")  # the pipelined request after it was answered too


async def test_a_bad_awaited_answer_closes_the_connection_without_an_unhandled_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def bad(request: Request) -> Response:
        return Response(200, b"x", (("X-Bad", "a\r\nb"),))  # a header that must not be sent

    caplog.set_level(logging.ERROR, logger="asyncio")
    started = time.monotonic()
    got = await exchange(bad, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    gc.collect()  # an exception nobody retrieved is logged when its task is collected
    assert got == b""
    assert time.monotonic() - started < http_listener.IDLE_TIMEOUT / 2  # closed, not timed out
    assert not [r for r in caplog.records if r.name == "asyncio"]


async def test_a_whole_head_over_16_kib_in_one_read_is_refused() -> None:
    """A complete 100 kB head arriving in one read is refused like one arriving in parts."""
    head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    got = await exchange(lambda request: Response(200, b"ok"), head)
    assert got.startswith(b"HTTP/1.1 431")
    small = (
        b"GET / HTTP/1.1\r\nHost: x\r\nX-Fine: " + b"a" * 8000 + b"\r\nConnection: close\r\n\r\n"
    )
    assert (await exchange(lambda request: Response(200, b"ok"), small)).endswith(b"ok")
