"""The HTTP listener's serving path under a busy pipeline (issue 15, P7).

The defects: a scrape needed the GIL once per send and once per refill of the socket buffer,
and each time could wait a whole switch interval while the pipeline thread computed, so a
busy pipeline doubled the scrape's p99. The listener now asks for a send buffer that takes a
whole body where the kernel allows it, sends a small answer's head and body in one call, and
bounds the wait for the GIL with a shorter switch interval.

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
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any

import pytest

from otelgpu import http_listener, http_send_buffer
from otelgpu.http_listener import Listener, Request, Response
from otelgpu.http_send_buffer import choose_send_buffer
from tests.peers.raw_http import raw

SMALL = b"x" * (100 * 1024)  # a 10k-series gzip body is ~170 kB
BIG = b"y" * (2 * 1024 * 1024)
MiB = 1024 * 1024


async def answer(request: Request) -> Response:
    return Response(200, BIG if request.path == "/big" else SMALL)


@pytest.fixture(autouse=True)
def _switch_interval_restored() -> Iterator[None]:
    saved = sys.getswitchinterval()
    yield
    sys.setswitchinterval(saved)


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


def test_a_send_buffer_is_asked_only_where_it_beats_autotuning() -> None:
    default_kernel = (212_992, 4 * MiB)  # net.core.wmem_max, tcp_wmem's maximum
    assert choose_send_buffer(*default_kernel) is None  # 416 KiB locked < 4 MiB autotuned
    assert choose_send_buffer(4 * MiB, 4 * MiB) == 4 * MiB  # granted 8 MiB > 4 MiB
    assert choose_send_buffer(64 * MiB, 4 * MiB) == 8 * MiB  # never more than a body needs
    assert choose_send_buffer(2 * MiB, 4 * MiB) is None  # 4 MiB: no better than autotuning


async def test_accepted_connections_get_the_send_buffer(
    listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_send_buffer, "send_buffer_size", lambda: 3 * MiB)
    calls = SocketCalls(monkeypatch, listener.port)
    assert await asyncio.to_thread(fetch, listener.port, "/") == [SMALL]
    assert (socket.SOL_SOCKET, socket.SO_SNDBUF, 3 * MiB) in calls.options


async def test_no_send_buffer_is_asked_where_autotuning_is_better(
    listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_send_buffer, "send_buffer_size", lambda: None)
    calls = SocketCalls(monkeypatch, listener.port)
    assert await asyncio.to_thread(fetch, listener.port, "/") == [SMALL]
    assert not [c for c in calls.options if c[1] == socket.SO_SNDBUF]


async def test_a_small_answer_leaves_in_one_send_a_big_one_is_not_copied(
    listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = SocketCalls(monkeypatch, listener.port)
    assert await asyncio.to_thread(fetch, listener.port, "/", "/big") == [SMALL, BIG]
    heads = [i for i, data in enumerate(calls.sends) if data.startswith(b"HTTP/1.1 200")]
    assert len(heads) == 2
    assert SMALL[:1000] in calls.sends[heads[0]]  # the small body went with its head
    assert calls.sends[heads[1]].endswith(b"\r\n\r\n")  # the big body went as its own object
    assert calls.sends[heads[1] + 1].startswith(BIG[:1000])


async def test_a_big_answer_the_kernel_takes_in_parts_is_not_copied_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Defect (issue 15, P7): asyncio's transport copies whatever one `send` did not take,
    twice (`data[n:]`, then into its bytearray): for a 10k-series plain body that was ~6 MB
    copied per scrape, under the GIL. The body now goes out in slices of it, each handed to
    `send` itself once the one before has left, so at most one slice's rest is ever copied."""
    body = bytes(range(256)) * (6 * MiB // 256)  # a plain 10k-series body is ~6.4 MB
    monkeypatch.setattr(http_send_buffer, "send_buffer_size", lambda: 64 * 1024)
    server = Listener(lambda request: Response(200, body), "127.0.0.1", 0)
    await server.start()
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
    # every slice went to `send` itself, whole, the next once the one before had left
    assert slices == [min(step, len(body) - start) for start in range(0, len(body), step)]
    assert copies and max(copies) <= step  # the kernel took them in parts: rests were copied


async def test_a_body_the_granted_send_buffer_holds_leaves_in_one_send(
    listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel granted the send buffer asked for (Linux reports twice the value
    asked), a body that fits is handed to `send` whole: slicing it would only add sends."""
    assert http_send_buffer.body_slice(None) == http_send_buffer.BODY_SLICE  # autotuning
    assert http_send_buffer.body_slice(8 * MiB) == 8 * MiB  # asked 4 MiB: 6.4 MB in one send
    assert http_send_buffer.body_slice(416 * 1024) == http_send_buffer.BODY_SLICE  # never less
    monkeypatch.setattr(http_send_buffer, "send_buffer_size", lambda: 4 * MiB)
    with socket.socket() as probe:  # what this kernel grants (net.core.wmem_max caps it)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MiB)
        granted = probe.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    calls = SocketCalls(monkeypatch, listener.port)
    assert await asyncio.to_thread(fetch, listener.port, "/big") == [BIG]
    body_sends = [length for _, length, viewed in calls.handed if viewed is BIG]
    assert body_sends[0] == min(len(BIG), http_send_buffer.body_slice(granted))


def test_the_send_buffer_asked_follows_this_kernels_limits() -> None:
    """`send_buffer_size` reads net.core.wmem_max and net.ipv4.tcp_wmem (here, on Linux)."""
    with open("/proc/sys/net/core/wmem_max", encoding="ascii") as file:
        wmem_max = int(file.read())
    with open("/proc/sys/net/ipv4/tcp_wmem", encoding="ascii") as file:
        autotune_max = int(file.read().split()[2])
    expected = choose_send_buffer(wmem_max, autotune_max)
    assert http_send_buffer.send_buffer_size.__wrapped__() == expected


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


async def test_start_bounds_the_wait_for_the_gil() -> None:
    sys.setswitchinterval(0.005)  # the interpreter's default
    server = Listener(answer, "127.0.0.1", 0)
    await server.start()
    try:
        assert sys.getswitchinterval() == pytest.approx(http_listener.SWITCH_INTERVAL)
        assert http_listener.SWITCH_INTERVAL < 0.001
    finally:
        await server.stop()


# --- answered where it was read (session 5) ------------------------------------------------
# The defect: every request went through a stream task, so a ready answer (every /metrics and
# /health answer without a password) waited for another turn of the listener's loop, and a turn
# is a `select` that releases the GIL: one more hand-over per scrape to wait for while the
# pipeline computes (docs/dev/p7.md). Now the protocol answers inside `data_received`.


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


async def test_a_client_that_stops_reading_is_closed_after_the_idle_timeout() -> None:
    server = Listener(answer, "127.0.0.1", 0, idle_timeout=0.5)
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


# --- found by review of the protocol listener (session 5) ----------------------------------


async def test_a_client_that_sends_but_never_reads_is_dropped_and_not_buffered() -> None:
    """It asked for a big answer and keeps writing: reading pauses with writing, so its bytes
    neither pile up in h11's buffer nor keep the idle timer fresh."""
    huge = b"z" * (20 * MiB)
    server = Listener(lambda request: Response(200, huge), "127.0.0.1", 0, idle_timeout=0.5)
    await server.start()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        sock.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(40):  # 4 s: eight idle timeouts
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
    `executor.shutdown(cancel_futures=True)`. Before, the connection hung with no answer."""
    executor = concurrent.futures.ThreadPoolExecutor(1)
    started = threading.Event()
    executor.submit(lambda: (started.set(), time.sleep(0.3)))  # a check in progress

    async def queued(request: Request) -> Response:
        await asyncio.get_running_loop().run_in_executor(executor, time.sleep, 0)
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
        await asyncio.to_thread(started.wait, 5)
        await asyncio.sleep(0.1)  # the request is queued behind the check in progress
        await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)
        got = await ask
    finally:
        await server.stop()
    assert got.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in got.lower()
    assert got.endswith(b"next")  # the pipelined request after it was answered too


async def test_a_bad_awaited_answer_closes_the_connection_without_an_unhandled_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def bad(request: Request) -> Response:
        return Response(200, b"x", (("X-Bad", "a\r\nb"),))  # h11 refuses to send this header

    caplog.set_level(logging.ERROR, logger="asyncio")
    started = time.monotonic()
    got = await exchange(bad, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    gc.collect()  # an exception nobody retrieved is logged when its task is collected
    assert got == b""
    assert time.monotonic() - started < http_listener.IDLE_TIMEOUT / 2  # closed, not timed out
    assert not [r for r in caplog.records if r.name == "asyncio"]


async def test_a_whole_head_over_16_kib_in_one_read_is_refused() -> None:
    """h11 bounds only a head still incomplete: a complete 100 kB head in one read got
    through (the stream listener read 64 KiB at a time and refused it)."""
    head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    got = await exchange(lambda request: Response(200, b"ok"), head)
    assert got.startswith(b"HTTP/1.1 431")
    small = (
        b"GET / HTTP/1.1\r\nHost: x\r\nX-Fine: " + b"a" * 8000 + b"\r\nConnection: close\r\n\r\n"
    )
    assert (await exchange(lambda request: Response(200, b"ok"), small)).endswith(b"ok")
