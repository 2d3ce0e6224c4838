"""`otelgpu.confighttp.send_buffer` on real loopback sockets: the send buffer asked for, the
unsent bytes the kernel holds, the reset that drops them, and the 128 KiB slices a big answer
is handed to `send` in."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Iterator

import pytest

from otelgpu.confighttp import send_buffer
from otelgpu.confighttp.listener import Listener, Response
from tests.unit.core.test_http_listener import SocketCalls, fetch

KiB = 1024


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected loopback TCP pair: (the accepted side, the client), the client not reading."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * KiB)
    with accepted, client:
        yield accepted, client


def _fill(sock: socket.socket) -> int:
    """Writes until the kernel takes no more; the bytes written."""
    sock.setblocking(False)
    written = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            written += sock.send(b"u" * 65536)
    return written


def test_the_send_buffer_asked_for_is_64_kib(pair: tuple[socket.socket, socket.socket]) -> None:
    accepted, _ = pair
    send_buffer.size_send_buffer(accepted)
    # Linux doubles what is asked, for its bookkeeping: ~128 KiB a connection.
    assert accepted.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * 64 * KiB
    send_buffer.size_send_buffer(None)  # no socket: nothing to size


def test_unsent_bytes_are_counted_and_none_where_nothing_can_be_asked(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    accepted, _ = pair
    assert send_buffer.kernel_unsent(accepted) == 0
    written = _fill(accepted)
    assert 0 < send_buffer.kernel_unsent(accepted) <= written
    assert send_buffer.kernel_unsent(None) == 0
    closed = socket.socket()
    closed.close()
    assert send_buffer.kernel_unsent(closed) == 0  # the ioctl fails: 0, not an error


def _linger(sock: socket.socket) -> tuple[int, int]:
    on, seconds = struct.unpack("ii", sock.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8))
    return on, seconds


def test_a_socket_with_unsent_bytes_is_reset_on_close_an_empty_one_closes_in_order(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    accepted, client = pair
    send_buffer.reset_on_close(accepted)
    assert _linger(accepted) == (0, 0)  # nothing queued: an orderly close
    _fill(accepted)
    send_buffer.reset_on_close(accepted)
    assert _linger(accepted) == (1, 0)  # linger on, 0 s: close() resets
    accepted.close()
    client.setblocking(True)
    client.settimeout(10)
    with pytest.raises(ConnectionResetError):  # what was queued is dropped, not delivered
        while client.recv(1 << 20):
            pass
    send_buffer.reset_on_close(None)  # no socket: nothing to do


async def test_a_big_answer_is_handed_to_send_in_slices_of_128_kib(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = bytes(range(256)) * (4 * 1024)  # 1 MiB
    server = Listener(lambda request: Response(200, body), "127.0.0.1", 0)
    await server.start()
    try:
        calls = SocketCalls(monkeypatch, server.port)
        assert await asyncio.to_thread(fetch, server.port, "/") == [body]
    finally:
        await server.stop()
    head, _, start = calls.sends[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and body.startswith(start)
    # The head leaves with the body's start, 128 KiB in all; then slices of the body object.
    assert calls.handed[0][1] == 128 * KiB
    assert max(length for _, length, _ in calls.handed) == 128 * KiB
    slices = [length for _, length, viewed in calls.handed if viewed is body]
    assert len(slices) >= 6 and set(slices) == {128 * KiB}
