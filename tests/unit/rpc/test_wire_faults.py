"""otelgpu.rpc against answers grpcio's server never gives: a scripted HTTP/2 server (the `h2`
library, server side) that answers each call as the test says, on a unix socket."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest

from otelgpu.rpc import Address, Channel, RpcError, StatusCode

METHOD = "/test.Echo/Call"
OK = [(":status", "200"), ("content-type", "application/grpc")]
# How one call is answered: (the server's connection, the stream) -> None.
Answer = Callable[[h2.connection.H2Connection, int], None]


def message(payload: bytes, flag: int = 0) -> bytes:
    return bytes((flag,)) + len(payload).to_bytes(4, "big") + payload


def answer_with(data: bytes, headers: list[tuple[str, str]], status: str = "0") -> Answer:
    def answer(conn: h2.connection.H2Connection, stream: int) -> None:
        conn.send_headers(stream, headers)
        if data:
            conn.send_data(stream, data)
        conn.send_headers(stream, [("grpc-status", status)], end_stream=True)

    return answer


class ScriptedServer:
    """Answers the n-th call (over all connections) with `script[n]`, the rest with an echo."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.script: list[Answer] = []
        self.early = False  # answer at the first DATA frame, before the request has ended
        self.connections = 0
        self.calls = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        bodies: dict[int, bytes] = {}
        answered: set[int] = set()
        while data := await reader.read(65536):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                    if self.early and event.stream_id not in answered:
                        answered.add(event.stream_id)
                        self._answer(conn, event.stream_id, b"")
                elif isinstance(event, h2.events.StreamEnded) and not self.early:
                    self._answer(conn, event.stream_id, bodies.pop(event.stream_id, b""))
            writer.write(conn.data_to_send())
            await writer.drain()
        writer.close()

    def _answer(self, conn: h2.connection.H2Connection, stream: int, body: bytes) -> None:
        n, self.calls = self.calls, self.calls + 1
        if n < len(self.script):
            self.script[n](conn, stream)
        else:
            answer_with(body, OK)(conn, stream)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ScriptedServer]:
    running = ScriptedServer(tmp_path / "h2.sock")
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def channel(server: ScriptedServer) -> AsyncIterator[Channel]:
    opened = Channel(Address(path=str(server.socket)))
    yield opened
    await opened.close()


async def test_the_scripted_server_echoes(channel: Channel) -> None:
    assert await channel.unary(METHOD, b"ping", timeout=5) == b"ping"


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("503", StatusCode.UNAVAILABLE),
        ("429", StatusCode.UNAVAILABLE),
        ("404", StatusCode.UNIMPLEMENTED),
        ("401", StatusCode.UNAUTHENTICATED),
        ("403", StatusCode.PERMISSION_DENIED),
        ("400", StatusCode.INTERNAL),
        ("418", StatusCode.UNKNOWN),
    ],
)
async def test_an_http_error_status_reads_as_grpc_maps_it(
    server: ScriptedServer, channel: Channel, status: str, code: StatusCode
) -> None:
    def answer(conn: h2.connection.H2Connection, stream: int) -> None:
        conn.send_headers(stream, [(":status", status)], end_stream=True)

    server.script = [answer]
    with pytest.raises(RpcError) as failure:
        await channel.unary(METHOD, b"x", timeout=5)
    assert failure.value.code is code and status in failure.value.details


@pytest.mark.parametrize(
    ("answer", "code", "words"),
    [
        (answer_with(message(b"a"), OK, status="x"), StatusCode.INTERNAL, "no grpc-status"),
        (answer_with(message(b"a"), OK, status="99"), StatusCode.UNKNOWN, ""),
        (answer_with(b"", OK), StatusCode.INTERNAL, "without an answer"),
        (answer_with(message(b"a") + message(b"b"), OK), StatusCode.INTERNAL, "exactly one"),
        (answer_with(message(b"a")[:-1], OK), StatusCode.INTERNAL, "exactly one"),
        (answer_with(message(b"a", flag=1), OK), StatusCode.INTERNAL, "compressed with"),
        (
            answer_with(message(b"not gzip", flag=1), [*OK, ("grpc-encoding", "gzip")]),
            StatusCode.INTERNAL,
            "undecodable gzip",
        ),
    ],
)
async def test_a_malformed_answer_fails_the_call_with_a_reason(
    server: ScriptedServer, channel: Channel, answer: Answer, code: StatusCode, words: str
) -> None:
    server.script = [answer]
    with pytest.raises(RpcError) as failure:
        await channel.unary(METHOD, b"x", timeout=5)
    assert failure.value.code is code and words in failure.value.details
    assert await channel.unary(METHOD, b"next", timeout=5) == b"next"


async def test_a_refused_stream_is_sent_again_on_a_fresh_connection(
    server: ScriptedServer, channel: Channel
) -> None:
    def refuse(conn: h2.connection.H2Connection, stream: int) -> None:
        conn.reset_stream(stream, h2.errors.ErrorCodes.REFUSED_STREAM)

    server.script = [refuse]
    assert await channel.unary(METHOD, b"again", timeout=5) == b"again"
    assert server.calls == 2


async def test_a_call_the_server_never_began_after_goaway_is_sent_again(
    server: ScriptedServer, channel: Channel
) -> None:
    def go_away(conn: h2.connection.H2Connection, stream: int) -> None:
        conn.close_connection(last_stream_id=stream - 2 if stream > 2 else 0)  # never begun

    server.script = [go_away]
    assert await channel.unary(METHOD, b"again", timeout=5) == b"again"
    assert server.connections == 2


async def test_twice_refused_is_unavailable(server: ScriptedServer, channel: Channel) -> None:
    def refuse(conn: h2.connection.H2Connection, stream: int) -> None:
        conn.reset_stream(stream, h2.errors.ErrorCodes.REFUSED_STREAM)

    server.script = [refuse, refuse]
    with pytest.raises(RpcError) as failure:
        await channel.unary(METHOD, b"x", timeout=5)
    assert failure.value.code is StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (h2.errors.ErrorCodes.CANCEL, StatusCode.CANCELLED),
        (h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, StatusCode.RESOURCE_EXHAUSTED),
        (h2.errors.ErrorCodes.INTERNAL_ERROR, StatusCode.INTERNAL),
    ],
)
async def test_a_reset_call_reads_as_grpc_maps_the_reset(
    server: ScriptedServer, channel: Channel, error: h2.errors.ErrorCodes, code: StatusCode
) -> None:
    def reset(conn: h2.connection.H2Connection, stream: int) -> None:
        conn.reset_stream(stream, error)

    server.script = [reset]
    with pytest.raises(RpcError) as failure:
        await channel.unary(METHOD, b"x", timeout=5)
    assert failure.value.code is code


async def test_an_answer_before_the_whole_request_then_a_reset_is_the_answer(
    server: ScriptedServer, channel: Channel
) -> None:
    # A server may answer before reading all of a request, then reset the stream with
    # NO_ERROR to say it wants no more of it (RFC 9113, section 8.1).
    def answer_then_reset(conn: h2.connection.H2Connection, stream: int) -> None:
        answer_with(message(b"done"), OK)(conn, stream)
        conn.reset_stream(stream, h2.errors.ErrorCodes.NO_ERROR)

    server.early = True
    server.script = [answer_then_reset]
    assert await channel.unary(METHOD, b"x" * 200_000, timeout=5) == b"done"


async def test_a_socket_file_whose_daemon_listens_a_moment_later_is_reached(
    tmp_path: Path,
) -> None:
    # bind() makes the file, listen() comes after: a daemon starting up refuses connections
    # in between, and "one refresh after it returns" must still find it.
    path = tmp_path / "late.sock"
    late = ScriptedServer(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))

    async def listen_later() -> asyncio.AbstractServer:
        await asyncio.sleep(0.06)
        return await asyncio.start_unix_server(late._serve, sock=sock)

    starting = asyncio.create_task(listen_later())
    channel = Channel(Address(path=str(path)))
    try:
        assert await channel.unary(METHOD, b"late", timeout=5) == b"late"
    finally:
        await channel.close()
        server = await starting
        server.close()
        await server.wait_closed()


async def test_a_socket_nobody_listens_on_is_unavailable_after_a_short_while(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dead.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))  # as a crashed daemon leaves its socket file behind
    channel = Channel(Address(path=str(path)))
    try:
        with pytest.raises(RpcError) as failure:
            await channel.unary(METHOD, b"x", timeout=5)
        assert failure.value.code is StatusCode.UNAVAILABLE
        assert "refused" in failure.value.details.lower()
    finally:
        sock.close()
        await channel.close()
