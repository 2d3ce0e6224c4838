"""otelgpu.rpc against grpcio's server (the reference implementation of gRPC on HTTP/2): what
arrives, what comes back, and every way a call can fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio
import pytest

from otelgpu.rpc import Address, Channel, RpcError, StatusCode
from otelgpu.rpc import connection as connection_module
from otelgpu.rpc.status import Metadata

Handler = Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]
METHOD = "/test.Echo/Call"


class Peer:
    """A grpc.aio server on a unix socket whose one method runs `handler`."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.handler: Handler = self._echo
        self.seen: list[tuple[bytes, dict[str, str | bytes]]] = []
        self.server: grpc.aio.Server | None = None

    async def _echo(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def _call(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.seen.append((request, dict(context.invocation_metadata() or ())))
        return await self.handler(request, context)

    async def start(self, compression: grpc.Compression | None = None, **options: object) -> None:
        server = grpc.aio.server(options=list(options.items()), compression=compression)
        rpc = grpc.unary_unary_rpc_method_handler(self._call)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("test.Echo", {"Call": rpc}),)
        )
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self.server = server

    async def stop(self, grace: float | None = None) -> None:
        if self.server is not None:
            await self.server.stop(grace)
            self.server = None


@pytest.fixture
async def peer(tmp_path: Path) -> AsyncIterator[Peer]:
    running = Peer(tmp_path / "peer.sock")
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
def dials(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The unix socket connections the channel opens."""
    opened: list[str] = []
    real = asyncio.open_unix_connection

    async def counted(path: str, **kwargs: object) -> object:
        opened.append(path)
        return await real(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncio, "open_unix_connection", counted)
    return opened


@pytest.fixture
async def channel(peer: Peer) -> AsyncIterator[Channel]:
    opened = Channel(Address(path=str(peer.socket)), user_agent="otelgpu-test")
    yield opened
    await opened.close()


async def test_a_call_carries_the_request_metadata_and_deadline_and_returns_the_answer(
    peer: Peer, channel: Channel
) -> None:
    deadlines: list[float | None] = []

    async def answer(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        deadlines.append(context.time_remaining())
        return request[::-1]

    peer.handler = answer
    got = await channel.unary(
        METHOD, b"hello", timeout=7, metadata=(("containerd-namespace", "k8s.io"),)
    )
    assert got == b"olleh"
    request, metadata = peer.seen[0]
    assert request == b"hello"
    assert metadata["containerd-namespace"] == "k8s.io"
    assert str(metadata["user-agent"]).startswith("otelgpu-test")
    assert deadlines[0] is not None and 5 < deadlines[0] <= 7


async def test_empty_messages_and_many_calls_share_one_connection(
    peer: Peer, channel: Channel, dials: list[str]
) -> None:
    answers = await asyncio.gather(
        *(channel.unary(METHOD, bytes([i]) * i, timeout=5) for i in range(40))
    )
    assert answers == [bytes([i]) * i for i in range(40)]
    assert await channel.unary(METHOD, b"", timeout=5) == b""
    assert len(peer.seen) == 41 and dials == [str(peer.socket)]


async def test_big_requests_and_answers_cross_the_flow_control_windows(
    peer: Peer, tmp_path: Path
) -> None:
    await peer.stop()
    await peer.start(**{"grpc.max_receive_message_length": 64 << 20})
    channel = Channel(Address(path=str(peer.socket)), max_receive=64 << 20)
    big = bytes(range(256)) * (40 << 12)  # 40 MiB
    try:
        assert await channel.unary(METHOD, big, timeout=30) == big
    finally:
        await channel.close()


@pytest.mark.parametrize("code", [c for c in grpc.StatusCode if c is not grpc.StatusCode.OK])
async def test_every_status_reads_as_the_same_code_with_its_message_and_trailers(
    peer: Peer, channel: Channel, code: grpc.StatusCode
) -> None:
    async def abort(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        context.set_trailing_metadata((("why-bin", b"\x00\xffraw"), ("note", "plain")))
        await context.abort(code, "nöt % fine: 100%")
        raise AssertionError("abort returns no answer")

    peer.handler = abort
    with pytest.raises(RpcError) as failure:
        await channel.unary(METHOD, b"x", timeout=5)
    assert failure.value.code.name == code.name
    assert failure.value.details == "nöt % fine: 100%"
    trailers = dict(failure.value.trailers)
    assert trailers["why-bin"] == b"\x00\xffraw" and trailers["note"] == "plain"


async def test_an_unknown_method_is_unimplemented(channel: Channel) -> None:
    with pytest.raises(RpcError) as failure:
        await channel.unary("/test.Echo/Nope", b"x", timeout=5)
    assert failure.value.code is StatusCode.UNIMPLEMENTED


async def test_a_slow_answer_is_deadline_exceeded_and_the_server_sees_the_cancel(
    peer: Peer, channel: Channel
) -> None:
    cancelled = asyncio.Event()

    async def slow(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return b""

    peer.handler = slow
    with pytest.raises(RpcError) as failure:
        await channel.unary(METHOD, b"x", timeout=0.3)
    assert failure.value.code is StatusCode.DEADLINE_EXCEEDED
    await asyncio.wait_for(cancelled.wait(), 10)
    peer.handler = peer._echo
    assert await channel.unary(METHOD, b"after", timeout=5) == b"after"  # the connection lives


async def test_an_answer_over_the_limit_is_resource_exhausted_and_the_channel_goes_on(
    peer: Peer,
) -> None:
    channel = Channel(Address(path=str(peer.socket)), max_receive=1 << 20)

    async def big(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"z" * int(request)

    peer.handler = big
    try:
        with pytest.raises(RpcError) as failure:
            await channel.unary(METHOD, b"%d" % (3 << 20), timeout=10)
        assert failure.value.code is StatusCode.RESOURCE_EXHAUSTED
        assert str(3 << 20) in failure.value.details and str(1 << 20) in failure.value.details
        assert await channel.unary(METHOD, b"%d" % (1 << 20), timeout=10) == b"z" * (1 << 20)
    finally:
        await channel.close()


async def test_gzip_both_ways(peer: Peer, monkeypatch: pytest.MonkeyPatch) -> None:
    await peer.stop()
    await peer.start(compression=grpc.Compression.Gzip)  # every answer compressed
    written: list[int] = []
    real = asyncio.StreamWriter.write

    def counted(writer: asyncio.StreamWriter, data: bytes) -> None:
        written.append(len(data))
        real(writer, data)

    monkeypatch.setattr(asyncio.StreamWriter, "write", counted)
    answers: list[bytes] = []
    real_answer = connection_module.unary_answer

    def spy(headers: Metadata, trailers: Metadata, data: list[bytes], limit: int) -> bytes:
        answers.append(b"".join(data))
        return real_answer(headers, trailers, data, limit)

    monkeypatch.setattr(connection_module, "unary_answer", spy)
    channel = Channel(Address(path=str(peer.socket)), compress=True)
    try:
        assert await channel.unary(METHOD, b"abc" * 10_000, timeout=5) == b"abc" * 10_000
    finally:
        await channel.close()
    assert sum(written) < 2_000  # 30 kB of request went out gzipped
    assert answers[0][0] == 1 and len(answers[0]) < 2_000  # and came back gzipped


async def test_no_socket_is_unavailable_at_once_and_a_restarted_peer_is_dialled_again(
    peer: Peer, channel: Channel
) -> None:
    assert await channel.unary(METHOD, b"1", timeout=5) == b"1"
    await peer.stop()
    peer.socket.unlink(missing_ok=True)
    with pytest.raises(RpcError) as failure:
        await channel.unary(METHOD, b"2", timeout=5)
    assert failure.value.code is StatusCode.UNAVAILABLE
    assert str(peer.socket) in failure.value.details
    await peer.start()
    assert await channel.unary(METHOD, b"3", timeout=5) == b"3"


async def test_a_server_going_away_between_calls_costs_no_failed_call(
    peer: Peer, channel: Channel, dials: list[str]
) -> None:
    assert await channel.unary(METHOD, b"1", timeout=5) == b"1"
    # The server closes idle connections (GOAWAY) after 0.2 s; the next call dials anew.
    await peer.stop()
    await peer.start(**{"grpc.max_connection_idle_ms": 200})
    assert await channel.unary(METHOD, b"2", timeout=5) == b"2"
    await asyncio.sleep(1.0)
    assert await channel.unary(METHOD, b"3", timeout=5) == b"3"
    assert len(dials) == 3  # the first, after the restart, after the GOAWAY


async def test_a_peer_that_is_not_grpc_fails_the_call_not_the_caller(tmp_path: Path) -> None:
    socket = tmp_path / "http1.sock"

    async def http1(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(http1, path=str(socket))
    channel = Channel(Address(path=str(socket)))
    try:
        with pytest.raises(RpcError) as failure:
            await channel.unary(METHOD, b"x", timeout=5)
        assert failure.value.code is StatusCode.UNAVAILABLE
    finally:
        await channel.close()
        server.close()
        await server.wait_closed()


async def test_close_is_idempotent_and_a_closed_channel_dials_again(
    peer: Peer, channel: Channel
) -> None:
    await channel.close()
    await channel.close()
    assert await channel.unary(METHOD, b"again", timeout=5) == b"again"
