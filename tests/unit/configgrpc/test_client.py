"""`Client` against a standard grpcio server on loopback: what a call sends (bytes, metadata,
compression, user agent), what comes back (the answer, or an `RpcError` with the server's code,
message and trailers), deadlines, the answer-size limit, TLS, and closing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from otelgpu.configgrpc import ChannelPolicy, Client, Credentials, RpcError, StatusCode
from tests.peers.certs import issue
from tests.peers.prometheus import self_signed_cert
from tests.peers.relay import CountingRelay

ECHO = "/test.Echo/Call"
HEADERS = "/test.Echo/Headers"  # answers the request's metadata, as `key=value` lines
FAIL = "/test.Echo/Fail"  # aborts: code name, then message, from the request
HANG = "/test.Echo/Hang"  # never answers
SIZED = "/test.Echo/Sized"  # answers as many bytes as the request's decimal number
PEER = "/test.Echo/Peer"  # answers the caller's address: one port per connection
GATED = "/test.Echo/Gated"  # echoes once the test's gate opens
# Streams each comma-separated part of the request as a message of that many bytes; a part
# that is a status code's name ends the stream with it, "hang" waits without end, "deadline"
# answers the seconds the call's deadline leaves, as the server sees them.
STREAM = "/test.Echo/Stream"
PLAIN = ChannelPolicy(proxy=False)


async def _echo(request: bytes, context: Any) -> bytes:
    return request


async def _headers(request: bytes, context: Any) -> bytes:
    lines = [f"{k}={v!r}" for k, v in context.invocation_metadata()]
    return "\n".join(lines).encode()


async def _fail(request: bytes, context: Any) -> bytes:
    code, _, message = request.decode().partition(" ")
    context.set_trailing_metadata((("reason", "quota"), ("detail-bin", b"\x00\xff")))
    await context.abort(grpc.StatusCode[code], message)
    raise AssertionError("abort returns by raising")


_HANGING: list[asyncio.Event] = []  # set when a call reaches `Hang` (one per test)


async def _hang(request: bytes, context: Any) -> bytes:
    for event in _HANGING:
        event.set()
    await asyncio.Event().wait()
    return b""


async def _sized(request: bytes, context: Any) -> bytes:
    return b"s" * int(request)


async def _peer(request: bytes, context: Any) -> bytes:
    return str(context.peer()).encode()


_GATES: list[tuple[asyncio.Event, asyncio.Event]] = []  # (reached, open), one per test


async def _gated(request: bytes, context: Any) -> bytes:
    for reached, opened in _GATES:
        reached.set()
        await opened.wait()
    return request


_STREAMS_CANCELLED: list[asyncio.Event] = []  # set when a stream ends before its last part


async def _stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
    try:
        for part in filter(None, request.decode().split(",")):
            if part == "hang":
                await asyncio.Event().wait()
            elif part == "deadline":
                yield f"{context.time_remaining()}".encode()
                continue
            elif not part.isdigit():
                await context.abort(grpc.StatusCode[part], "as asked")
            yield b"s" * int(part)
    except (asyncio.CancelledError, GeneratorExit):
        # The call ended under the stream: while it hung, or before it got there (a client
        # that gives up at once cancels the call while its last message is being sent, and
        # the server then closes the stream at its `yield`)
        for event in _STREAMS_CANCELLED:
            event.set()
        raise


def _handlers() -> grpc.GenericRpcHandler:
    methods = {
        "Call": _echo,
        "Headers": _headers,
        "Fail": _fail,
        "Hang": _hang,
        "Sized": _sized,
        "Peer": _peer,
        "Gated": _gated,
    }
    handlers = {name: grpc.unary_unary_rpc_method_handler(fn) for name, fn in methods.items()}
    handlers["Stream"] = grpc.unary_stream_rpc_method_handler(_stream)
    return grpc.method_handlers_generic_handler("test.Echo", handlers)


@contextlib.asynccontextmanager
async def _server(credentials: grpc.ServerCredentials | None = None) -> AsyncIterator[int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_handlers(),))
    if credentials is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    try:
        yield port
    finally:
        await server.stop(None)


@pytest.fixture
async def port() -> AsyncIterator[int]:
    async with _server() as bound:
        yield bound


@contextlib.asynccontextmanager
async def _client(target: str, policy: ChannelPolicy = PLAIN, **how: Any) -> AsyncIterator[Client]:
    client = Client(target, policy, **how)
    try:
        yield client
    finally:
        await client.close()


async def test_a_call_sends_the_bytes_and_returns_the_answer_s_bytes(port: int) -> None:
    async with _client(f"127.0.0.1:{port}") as client:
        assert client.target == f"127.0.0.1:{port}"
        assert await client.unary(ECHO, b"\x00ping\xff", timeout=10) == b"\x00ping\xff"
        assert await client.unary(ECHO, b"", timeout=10) == b""


async def test_metadata_text_and_binary_reach_the_server_with_the_user_agent(port: int) -> None:
    metadata = (("x-scope-orgid", "team-a"), ("trace-bin", b"\x00\x01"))
    async with _client(f"127.0.0.1:{port}") as client:
        seen = (await client.unary(HEADERS, b"", timeout=10, metadata=metadata)).decode()
        bare = (await client.unary(HEADERS, b"", timeout=10)).decode()
    assert "x-scope-orgid='team-a'" in seen and "trace-bin=b'\\x00\\x01'" in seen
    assert "x-scope-orgid" not in bare
    assert "user-agent='otelgpu " in bare  # the policy's name, first
    async with (
        _server() as other,
        _client(f"127.0.0.1:{other}", ChannelPolicy(proxy=False, user_agent="probe")) as named,
    ):
        assert "user-agent='probe " in (await named.unary(HEADERS, b"", timeout=10)).decode()


async def test_a_failed_call_raises_the_server_s_code_message_and_trailers(port: int) -> None:
    async with _client(f"127.0.0.1:{port}") as client:
        with pytest.raises(RpcError) as raised:
            await client.unary(FAIL, b"RESOURCE_EXHAUSTED slow down", timeout=10)
        with pytest.raises(RpcError) as silent:
            await client.unary(FAIL, b"NOT_FOUND", timeout=10)
    error = raised.value
    assert error.code is StatusCode.RESOURCE_EXHAUSTED and error.details == "slow down"
    assert ("reason", "quota") in error.trailers
    assert ("detail-bin", b"\x00\xff") in error.trailers  # binary values stay bytes
    assert all(isinstance(key, str) for key, _ in error.trailers)
    assert str(error) == "RESOURCE_EXHAUSTED: slow down"
    assert (silent.value.code, silent.value.details, str(silent.value)) == (
        StatusCode.NOT_FOUND,
        "",
        "NOT_FOUND",
    )


async def test_a_call_past_its_deadline_is_deadline_exceeded(port: int) -> None:
    async with _client(f"127.0.0.1:{port}") as client:
        with pytest.raises(RpcError) as raised:
            await client.unary(HANG, b"", timeout=0.2)
        assert raised.value.code is StatusCode.DEADLINE_EXCEEDED
        assert await client.unary(ECHO, b"after", timeout=10) == b"after"  # the channel serves


async def test_a_call_to_nobody_is_unavailable() -> None:
    async with _server() as gone:
        pass
    async with _client(f"127.0.0.1:{gone}") as client:
        with pytest.raises(RpcError) as raised:
            await client.unary(ECHO, b"", timeout=10)
    assert raised.value.code is StatusCode.UNAVAILABLE and raised.value.details


async def test_an_answer_over_max_receive_is_refused_one_at_the_limit_is_not(port: int) -> None:
    async with _client(f"127.0.0.1:{port}", ChannelPolicy(proxy=False, max_receive=1000)) as client:
        assert len(await client.unary(SIZED, b"1000", timeout=10)) == 1000
        with pytest.raises(RpcError) as raised:
            await client.unary(SIZED, b"1001", timeout=10)
    assert raised.value.code is StatusCode.RESOURCE_EXHAUSTED


async def test_the_default_answer_limit_is_4_mib(port: int) -> None:
    async with _client(f"127.0.0.1:{port}", ChannelPolicy(proxy=False)) as client:
        assert len(await client.unary(SIZED, b"%d" % (4 << 20), timeout=30)) == 4 << 20
        with pytest.raises(RpcError) as raised:
            await client.unary(SIZED, b"%d" % ((4 << 20) + 1), timeout=30)
    assert raised.value.code is StatusCode.RESOURCE_EXHAUSTED


async def test_compression_gzips_the_request_on_the_wire_and_is_off_by_default(
    port: int,
) -> None:
    request = b"gpu " * (256 * 1024)  # 1 MiB that gzip shrinks a thousandfold
    sent = []
    for how in ({}, {"compression": True}):
        relay = CountingRelay(port)
        async with relay as relayed, _client(f"127.0.0.1:{relayed}", **how) as client:
            assert await client.unary(ECHO, request, timeout=30) == request
        sent.append(relay.sent)
    plain, gzipped = sent
    assert plain > len(request) > 100 * gzipped


async def test_close_ends_the_channel_and_the_next_call_opens_a_new_one(port: int) -> None:
    client = Client(f"127.0.0.1:{port}", PLAIN)
    await client.close()  # never opened: nothing to close
    reached = asyncio.Event()
    _HANGING.append(reached)
    try:
        hang = asyncio.create_task(client.unary(HANG, b"", timeout=30))
        await asyncio.wait_for(reached.wait(), 10)  # the call is at the server
    finally:
        _HANGING.remove(reached)
    await client.close()
    with pytest.raises(asyncio.CancelledError):  # calls in flight are cancelled
        await hang
    assert await client.unary(ECHO, b"again", timeout=10) == b"again"
    await client.close()
    await client.close()  # twice: still fine


async def test_a_call_failed_by_the_connection_s_fault_retires_it_without_cancelling_others(
    port: int,
) -> None:
    reached, opened = asyncio.Event(), asyncio.Event()
    _GATES.append((reached, opened))
    try:
        async with _client(f"127.0.0.1:{port}") as client:
            first = await client.unary(PEER, b"", timeout=10)
            waiting = asyncio.create_task(client.unary(GATED, b"kept", timeout=30))
            await asyncio.wait_for(reached.wait(), 10)  # in flight on the first connection
            with pytest.raises(RpcError) as stalled:
                await client.unary(HANG, b"", timeout=0.2)
            assert stalled.value.code is StatusCode.DEADLINE_EXCEEDED
            second = await client.unary(PEER, b"", timeout=10)
            assert second != first  # a new connection for the calls after the failure
            opened.set()
            assert await waiting == b"kept"  # the call open on the retired one was let end
            assert await client.unary(PEER, b"", timeout=10) == second
    finally:
        _GATES.remove((reached, opened))


async def test_a_retired_connection_is_closed_when_its_last_call_ends(port: int) -> None:
    """Retired while a call is open on it, it stays up for that call, and is closed (not left
    to the garbage collector) as soon as the call ends; the new connection stays."""
    reached, opened = asyncio.Event(), asyncio.Event()
    _GATES.append((reached, opened))
    relay = CountingRelay(port)
    try:
        async with relay as relayed, _client(f"127.0.0.1:{relayed}") as client:
            await client.unary(PEER, b"", timeout=10)
            waiting = asyncio.create_task(client.unary(GATED, b"kept", timeout=30))
            await asyncio.wait_for(reached.wait(), 10)
            with pytest.raises(RpcError):
                await client.unary(HANG, b"", timeout=0.2)  # retires the first connection
            await client.unary(PEER, b"", timeout=10)  # the second one
            assert relay.hangups == 0
            opened.set()
            assert await waiting == b"kept"
            await asyncio.wait_for(relay.hung_up.wait(), 10)
            assert relay.hangups == 1
            await client.unary(PEER, b"", timeout=10)  # the second connection still serves
    finally:
        _GATES.remove((reached, opened))


async def test_a_connection_retired_after_a_stream_ended_on_it_is_closed_at_once(
    port: int,
) -> None:
    """A stream that ended holds its connection no longer: the failure that retires the
    connection next closes it with its own call."""
    relay = CountingRelay(port)
    async with relay as relayed, _client(f"127.0.0.1:{relayed}") as client:
        assert await _streamed(client, b"1,2") == [1, 2]
        with pytest.raises(RpcError):
            await client.unary(HANG, b"", timeout=0.2)
        await asyncio.wait_for(relay.hung_up.wait(), 10)


async def test_closing_the_client_closes_a_retired_connection_too(port: int) -> None:
    reached, opened = asyncio.Event(), asyncio.Event()
    _GATES.append((reached, opened))
    relay = CountingRelay(port)
    try:
        async with relay as relayed:
            client = Client(f"127.0.0.1:{relayed}", PLAIN)
            await client.unary(PEER, b"", timeout=10)
            waiting = asyncio.create_task(client.unary(GATED, b"", timeout=30))
            await asyncio.wait_for(reached.wait(), 10)
            with pytest.raises(RpcError):
                await client.unary(HANG, b"", timeout=0.2)  # retired, a call still open on it
            await client.close()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await asyncio.wait_for(relay.hung_up.wait(), 10)
            assert relay.hangups == 1  # the retired one (no second connection was made)
    finally:
        _GATES.remove((reached, opened))


async def test_a_stream_fails_by_its_deadline_however_short(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline holds under a second too: the server sees no more than the 0.3 s the
    call was given; and a stream is sent at once (no pause before its first try: the pauses
    asked for are read, not timed)."""
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float, *args: Any) -> Any:
        pauses.append(delay)
        return await real_sleep(delay, *args)

    async with _client(f"127.0.0.1:{port}") as client:
        monkeypatch.setattr(asyncio, "sleep", sleep)
        assert await _streamed(client, b"1,2", timeout=10) == [1, 2]
        assert await client.unary(ECHO, b"x", timeout=10) == b"x"
        monkeypatch.undo()
        assert not [p for p in pauses if p > 0]
        (left,) = [m async for m in client.stream(STREAM, b"deadline", timeout=0.3)]
    # grpcio rounds a deadline up by a little: never near the second a floor would give
    assert 0 < float(left) < 0.5


async def test_an_error_the_server_answered_keeps_the_connection(port: int) -> None:
    async with _client(f"127.0.0.1:{port}") as client:
        first = await client.unary(PEER, b"", timeout=10)
        for code in ("NOT_FOUND", "RESOURCE_EXHAUSTED", "PERMISSION_DENIED", "UNKNOWN"):
            with pytest.raises(RpcError):
                await client.unary(FAIL, code.encode(), timeout=10)
        assert await client.unary(PEER, b"", timeout=10) == first
        for code in ("UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"):
            with pytest.raises(RpcError):  # these the connection may be to blame for
                await client.unary(FAIL, code.encode(), timeout=10)
            assert await client.unary(PEER, b"", timeout=10) != first
            first = await client.unary(PEER, b"", timeout=10)


@pytest.fixture
def tls(tmp_path: Path) -> tuple[bytes, bytes]:
    cert, key = self_signed_cert(tmp_path)  # for localhost and 127.0.0.1
    return cert.read_bytes(), key.read_bytes()


async def test_tls_checks_the_server_against_the_roots_and_the_name(
    tls: tuple[bytes, bytes],
) -> None:
    cert, key = tls
    async with _server(grpc.ssl_server_credentials([(key, cert)])) as secure:
        target = f"127.0.0.1:{secure}"
        for server_name, reached in (("", True), ("localhost", True), ("other.example", False)):
            trust = Credentials(root_certificates=cert, server_name=server_name)
            async with _client(target, credentials=trust) as client:
                try:
                    answer = await client.unary(ECHO, b"tls", timeout=10)
                except RpcError as exc:
                    assert exc.code is StatusCode.UNAVAILABLE, exc
                    answer = b""
            assert (answer == b"tls") is reached, server_name
        async with _client(target) as plain:  # no credentials: plaintext, which TLS refuses
            with pytest.raises(RpcError):
                await plain.unary(ECHO, b"", timeout=10)


async def test_tls_against_a_plaintext_server_says_so_and_other_failures_do_not(
    tls: tuple[bytes, bytes], port: int
) -> None:
    cert, key = tls
    trust = Credentials(root_certificates=cert)
    async with _client(f"127.0.0.1:{port}", credentials=trust) as client:
        with pytest.raises(RpcError) as plaintext:
            await client.unary(ECHO, b"", timeout=10)
    assert plaintext.value.plaintext_server, plaintext.value
    async with _server(grpc.ssl_server_credentials([(key, cert)])) as secure:
        wrong_roots = Credentials(root_certificates=issue().cert_pem)  # another CA
        async with _client(f"127.0.0.1:{secure}", credentials=wrong_roots) as client:
            with pytest.raises(RpcError) as untrusted:
                await client.unary(ECHO, b"", timeout=10)
    assert untrusted.value.code is StatusCode.UNAVAILABLE
    assert not untrusted.value.plaintext_server, untrusted.value
    async with _server() as gone:
        pass
    async with _client(f"127.0.0.1:{gone}", credentials=trust) as client:
        with pytest.raises(RpcError) as refused:
            await client.unary(ECHO, b"", timeout=10)
    assert not refused.value.plaintext_server, refused.value


async def _streamed(client: Client, request: bytes, timeout: float = 10) -> list[int]:
    return [len(m) async for m in client.stream(STREAM, request, timeout=timeout)]


async def test_a_stream_s_messages_arrive_one_by_one_each_under_the_receive_limit(
    port: int,
) -> None:
    policy = ChannelPolicy(max_receive=1000, proxy=False)
    async with _client(f"127.0.0.1:{port}", policy) as client:
        # the limit holds per message: many messages at the limit are no answer over it
        assert await _streamed(client, b",".join([b"1000"] * 50)) == [1000] * 50
        assert await _streamed(client, b"") == []  # no message at all
        with pytest.raises(RpcError) as over:
            await _streamed(client, b"10,1001")
        assert over.value.code is StatusCode.RESOURCE_EXHAUSTED


async def test_a_stream_that_fails_after_messages_raises_and_retires_only_for_the_connection(
    port: int,
) -> None:
    async with _client(f"127.0.0.1:{port}") as client:
        first = await client.unary(PEER, b"", timeout=10)
        received: list[int] = []
        with pytest.raises(RpcError) as failed:
            async for message in client.stream(STREAM, b"1,2,NOT_FOUND", timeout=10):
                received.append(len(message))
        assert received == [1, 2] and failed.value.code is StatusCode.NOT_FOUND
        assert await client.unary(PEER, b"", timeout=10) == first
        with pytest.raises(RpcError) as stalled:
            await _streamed(client, b"1,hang", timeout=0.5)
        assert stalled.value.code is StatusCode.DEADLINE_EXCEEDED
        assert await client.unary(PEER, b"", timeout=10) != first


async def test_a_stream_given_up_early_is_cancelled_and_its_connection_kept(port: int) -> None:
    cancelled = asyncio.Event()
    _STREAMS_CANCELLED.append(cancelled)
    try:
        async with _client(f"127.0.0.1:{port}") as client:
            first = await client.unary(PEER, b"", timeout=10)
            stream = client.stream(STREAM, b"1,2,hang", timeout=30)
            async with contextlib.aclosing(stream):
                async for message in stream:
                    if len(message) == 2:
                        break  # the server would never end the stream
            await asyncio.wait_for(cancelled.wait(), 10)  # the server saw the call end
            assert await client.unary(PEER, b"", timeout=10) == first
    finally:
        _STREAMS_CANCELLED.remove(cancelled)
