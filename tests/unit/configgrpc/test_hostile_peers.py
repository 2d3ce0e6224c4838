"""otelgpu.configgrpc against peers that misbehave on the wire (tests/unit/configgrpc/hostile.py)
and strict standard servers (grpcio's, with its enforcement settings): each attack fails the
call it aims at, within bounds, and the channel serves the next call once the peer is sane."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from otelgpu.configgrpc import ChannelPolicy, Client, RpcError, StatusCode
from otelgpu.configgrpc.client import REFUSED_RETRIES
from tests.unit.configgrpc.hostile import HostileServer
from tests.unit.configgrpc.measured import MiB, measured_call

METHOD = "/test.Echo/Call"


async def recovered(client: Client, payload: bytes) -> bool:
    """Whether the peer answers within two calls (a caller's refresh after the one that
    finds the old connection gone): the first call after a peer restarts may still be sent on
    the connection the peer just closed."""
    for _ in range(2):
        try:
            return await client.unary(METHOD, payload, timeout=30) == payload
        except RpcError as exc:
            if exc.code is not StatusCode.UNAVAILABLE:
                raise
    return False


@pytest.fixture
async def hostile(tmp_path: Path) -> AsyncIterator[HostileServer]:
    server = HostileServer(tmp_path / "h.sock")
    await server.start()
    yield server
    await server.stop()


async def test_a_sane_peer_echoes(hostile: HostileServer) -> None:
    client = Client(hostile.target, ChannelPolicy())
    try:
        assert await client.unary(METHOD, b"hello", timeout=10) == b"hello"
        assert await client.unary(METHOD, b"x" * 300_000, timeout=10) == b"x" * 300_000
    finally:
        await client.close()
    assert hostile.calls == 2 and hostile.connections == 1


async def test_a_gzip_bomb_is_refused_at_the_answer_limit_without_inflating_it(
    tmp_path: Path,
) -> None:
    server = HostileServer(tmp_path / "b.sock", bomb_size=512 * MiB)
    await server.start()
    try:
        call = await measured_call(server, "gzip_bomb", max_receive=4 * MiB, timeout=20)
    finally:
        await server.stop()
    assert call.outcome == "RESOURCE_EXHAUSTED", call
    # 512 MiB inflated from ~0.5 MiB on the wire: the client grows by less than 32 MiB.
    assert call.growth < 32 * MiB, call


async def test_goaway_with_the_connection_kept_open_fails_the_call_at_once_in_bounded_memory(
    tmp_path: Path,
) -> None:
    # A gateway that answers every connection and every call with GOAWAY ("nothing begun")
    # and never closes: a client that sends such a call again does so on the same dying
    # connection without end, growing by gigabytes within seconds. The policy's bound: the
    # call fails UNAVAILABLE, the client grows by less than 16 MiB.
    server = HostileServer(tmp_path / "g.sock")
    await server.start()
    try:
        call = await measured_call(server, "goaway_kept_open", max_receive=4 * MiB, timeout=10)
    finally:
        await server.stop()
    assert call.outcome == "UNAVAILABLE", call
    assert call.growth < 16 * MiB, call
    assert server.goaways >= 1 and server.calls == 1  # the warm-up only: nothing began


@pytest.mark.parametrize(
    ("limit", "bound"),
    [
        (64 * 2**10, 16 * MiB),  # an OTLP receiver's largest answer
        (1 * MiB, 96 * MiB),  # the kubelet's default (k8s_attributes max_receive_message_size)
    ],
)
async def test_answers_in_one_byte_frames_cost_at_most_the_stated_bound(
    tmp_path: Path, limit: int, bound: int
) -> None:
    # An answer as large as the limit allows, one byte per DATA frame (9 bytes of header
    # each), answer after answer on one channel: grpcio keeps each frame apart while the
    # message arrives, about 16 bytes per byte, and the allocator keeps some after. The bound
    # per hostile peer (docs/architecture.md, "gRPC peers") follows from the peer's limit.
    server = HostileServer(tmp_path / "t.sock", answer_size=limit - 5)  # 5: the gRPC prefix
    await server.start()
    try:
        call = await measured_call(server, "tiny_frames", max_receive=limit, timeout=60, calls=10)
    finally:
        await server.stop()
    assert call.outcome == "OK", call
    assert call.growth < bound, call
    print(f"1-byte frames, limit {limit} B: {call.growth / MiB:.1f} MiB")


@pytest.mark.parametrize("flood", ["ping_flood", "settings_flood", "empty_data_flood"])
async def test_a_control_frame_flood_stops_neither_other_peers_nor_the_call_after_it(
    tmp_path: Path, flood: str
) -> None:
    path = tmp_path / "f.sock"
    hostile = HostileServer(path, mode=flood)
    sane = HostileServer(tmp_path / "sane.sock")
    await hostile.start()
    await sane.start()
    flooded = Client(hostile.target, ChannelPolicy(max_backoff=0.5))
    other = Client(sane.target, ChannelPolicy())
    try:
        call = asyncio.create_task(flooded.unary(METHOD, b"", timeout=60))
        await hostile.called.wait()
        # While one peer floods its connection, another peer's calls go on, one after another.
        for n in range(20):
            assert await other.unary(METHOD, b"%d" % n, timeout=30) == b"%d" % n
        assert hostile.frames_sent >= 64, "the flood did not run"
        await hostile.stop()  # the flooding peer goes away: its call fails, not hangs
        with pytest.raises(RpcError) as failed:
            await call
        assert failed.value.code is StatusCode.UNAVAILABLE, failed.value
        path.unlink()
        restarted = HostileServer(path)  # sane again: the same channel reaches it
        await restarted.start()
        try:
            assert await recovered(flooded, b"next")
        finally:
            await restarted.stop()
    finally:
        await flooded.close()
        await other.close()
        await sane.stop()


async def test_a_connection_that_pings_without_end_is_dialled_again_after_the_call_it_stalled(
    tmp_path: Path,
) -> None:
    # The peer floods PINGs on its connection and answers no call there: keepalive sees a
    # lively peer, so only the failed call shows the connection is bad. The next call goes on
    # a new connection, which the peer, sane again, answers.
    stormy = HostileServer(tmp_path / "p.sock", mode="ping_storm")
    await stormy.start()
    client = Client(stormy.target, ChannelPolicy(max_backoff=0.5))
    try:
        with pytest.raises(RpcError) as failed:
            await client.unary(METHOD, b"lost", timeout=1)
        assert failed.value.code is StatusCode.DEADLINE_EXCEEDED, failed.value
        assert stormy.frames_sent >= 64, "the storm did not run"
        stormy.mode = "echo"  # new connections are served; the stormy one storms on
        assert await client.unary(METHOD, b"next", timeout=10) == b"next"
        assert stormy.connections == 2
    finally:
        await client.close()
        await stormy.stop()


async def test_a_peer_that_never_opens_its_window_fails_the_call_by_its_deadline(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.sock"
    stuck = HostileServer(path, mode="zero_window")
    await stuck.start()
    client = Client(stuck.target, ChannelPolicy(max_backoff=0.5))
    try:
        with pytest.raises(RpcError) as failed:
            await client.unary(METHOD, b"x" * 1000, timeout=1)
        assert failed.value.code is StatusCode.DEADLINE_EXCEEDED
        await stuck.stop()
        path.unlink()
        sane = HostileServer(path)  # the peer restarted, sane
        await sane.start()
        try:
            assert await recovered(client, b"again")
        finally:
            await sane.stop()
    finally:
        await client.close()


async def test_goaway_after_the_server_began_a_call_fails_it_and_it_is_not_sent_again(
    hostile: HostileServer,
) -> None:
    client = Client(hostile.target, ChannelPolicy())
    try:
        hostile.mode = "goaway_processed"
        with pytest.raises(RpcError) as failed:
            await client.unary(METHOD, b"once", timeout=30)
        assert failed.value.code is StatusCode.UNAVAILABLE
        assert hostile.calls == 1  # the server may have done the work: grpcio did not resend
        assert await client.unary(METHOD, b"next", timeout=30) == b"next"
        assert hostile.calls == 2 and hostile.connections == 2
    finally:
        await client.close()


async def test_goaway_before_the_server_began_a_call_fails_it_and_the_next_call_dials_anew(
    hostile: HostileServer,
) -> None:
    # grpcio would send the call again by itself (a transparent retry); the policy leaves that
    # to the caller's own loop, which asks again with its own back-off.
    client = Client(hostile.target, ChannelPolicy(max_backoff=0.5))
    try:
        hostile.mode = "goaway_unprocessed"
        with pytest.raises(RpcError) as failed:
            await client.unary(METHOD, b"moved", timeout=30)
        assert failed.value.code is StatusCode.UNAVAILABLE
        assert hostile.calls == 0  # the server never began it
        assert await client.unary(METHOD, b"again", timeout=30) == b"again"
        assert hostile.calls == 1 and hostile.connections == 2
    finally:
        await client.close()


async def test_a_stream_the_server_refused_is_sent_again_on_the_same_connection(
    hostile: HostileServer,
) -> None:
    # REFUSED_STREAM says the server never processed the call (RFC 9113 8.7): it is safe to
    # send again, and a server at its stream limit answers it so while a stream closes.
    client = Client(hostile.target, ChannelPolicy(proxy=False))
    try:
        assert await client.unary(METHOD, b"one", timeout=30) == b"one"
        hostile.mode = "refused_once"
        assert await client.unary(METHOD, b"two", timeout=30) == b"two"
        assert (hostile.refused, hostile.calls, hostile.connections) == (1, 2, 1)
    finally:
        await client.close()


async def test_a_streamed_call_the_server_refused_is_sent_again_on_the_same_connection(
    hostile: HostileServer,
) -> None:
    client = Client(hostile.target, ChannelPolicy(proxy=False))
    try:
        hostile.mode = "refused_once"
        answers = [m async for m in client.stream(METHOD, b"two", timeout=30)]
        assert answers == [b"two"]
        assert (hostile.refused, hostile.calls, hostile.connections) == (1, 1, 1)
    finally:
        await client.close()


async def _call(client: Client, streamed: bool) -> list[bytes]:
    """One call of METHOD, unary or streamed, as the list of its answers."""
    if streamed:
        return [m async for m in client.stream(METHOD, b"never", timeout=30)]
    return [await client.unary(METHOD, b"never", timeout=30)]


@pytest.mark.parametrize("streamed", [False, True], ids=["unary", "stream"])
async def test_a_server_refusing_every_stream_fails_the_call_after_a_bounded_number_of_tries(
    hostile: HostileServer, streamed: bool
) -> None:
    """Six resends, then the last refusal is the call's error: never an empty answer taken
    for a whole one."""
    client = Client(hostile.target, ChannelPolicy(proxy=False))
    try:
        hostile.mode = "refused"
        with pytest.raises(RpcError) as failed:
            await _call(client, streamed)
        assert failed.value.code is StatusCode.UNAVAILABLE
        assert (hostile.refused, hostile.calls) == (7, 0)  # the call and six resends
        assert REFUSED_RETRIES == 6
    finally:
        await client.close()


@pytest.mark.parametrize("streamed", [False, True], ids=["unary", "stream"])
async def test_each_resend_of_a_refused_call_waits_twice_as_long_as_the_one_before(
    hostile: HostileServer, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """5, 10, 20, 40, 80 and 160 ms: a server refusing every stream is asked again after
    pauses that double, not in a burst (the pauses asked for are read, not timed)."""
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float, *args: Any) -> Any:
        pauses.append(delay)
        return await real_sleep(delay, *args)

    client = Client(hostile.target, ChannelPolicy(proxy=False))
    try:
        assert await client.unary(METHOD, b"up", timeout=30) == b"up"  # connected
        hostile.mode = "refused"
        monkeypatch.setattr(asyncio, "sleep", sleep)
        with pytest.raises(RpcError):
            await _call(client, streamed)
        monkeypatch.undo()
        doubling = [0.005 * 2**n for n in range(6)]
        assert [p for p in pauses if p in doubling] == doubling
        assert hostile.refused == 7
    finally:
        await client.close()


async def test_a_refused_call_is_sent_again_only_while_its_deadline_leaves_room(
    hostile: HostileServer,
) -> None:
    # The pauses before each resend double from REFUSED_PAUSE (5, 10, 20 ms, ...): within a
    # 20 ms deadline no more than two of them fit, whatever the machine's speed.
    client = Client(hostile.target, ChannelPolicy(proxy=False))
    try:
        assert await client.unary(METHOD, b"up", timeout=30) == b"up"  # connected
        hostile.mode = "refused"
        with pytest.raises(RpcError):
            await client.unary(METHOD, b"never", timeout=0.02)
        assert 1 <= hostile.refused <= 3 < 1 + REFUSED_RETRIES
        before = hostile.refused
        with pytest.raises(RpcError):  # half a second leaves room for the first resends
            await client.unary(METHOD, b"never", timeout=0.5)
        assert hostile.refused - before >= 2
    finally:
        await client.close()


async def test_a_peer_gone_silent_is_dropped_by_keepalive_and_dialled_again(
    hostile: HostileServer,
) -> None:
    policy = ChannelPolicy(keepalive_time=0.2, keepalive_timeout=0.5, max_backoff=0.5)
    client = Client(hostile.target, policy)
    try:
        assert await client.unary(METHOD, b"one", timeout=30) == b"one"
        hostile.mode = "black_hole"  # reads everything, answers nothing, not even PINGs
        with pytest.raises(RpcError) as failed:
            await client.unary(METHOD, b"lost", timeout=60)
        # The unanswered PING ended it, long before its deadline.
        assert failed.value.code is StatusCode.UNAVAILABLE, failed.value
        hostile.mode = "echo"
        assert await recovered(client, b"back")
        assert hostile.connections == 2
    finally:
        await client.close()


async def test_a_connection_no_call_uses_is_released_after_the_idle_timeout(
    hostile: HostileServer,
) -> None:
    # Whatever the peer does on a connection between two far-apart calls (a flood, a stall),
    # the client does not keep it: past the idle timeout it closes it, and dials at the next.
    client = Client(hostile.target, ChannelPolicy(idle_timeout=1))
    try:
        assert await client.unary(METHOD, b"one", timeout=30) == b"one"
        async with asyncio.timeout(60):  # grpcio's own default would keep it half an hour
            await hostile.disconnected.wait()
        assert await client.unary(METHOD, b"two", timeout=30) == b"two"
        assert hostile.connections == 2
    finally:
        await client.close()


async def _strict_server(
    options: list[tuple[str, int]],
    handler_gate: asyncio.Event | None = None,
    called: asyncio.Event | None = None,
) -> tuple[grpc.aio.Server, int, list[str], list[int]]:
    """A grpcio server on TCP: Call echoes (after `handler_gate`, when given); it records
    each call's peer address (one port per connection) and how many calls were open at once,
    and sets `called` at the first call."""
    called = called or asyncio.Event()
    peers: list[str] = []
    open_now = [0, 0]  # calls open now, the most at once

    async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        peers.append(context.peer())
        called.set()
        open_now[0] += 1
        open_now[1] = max(open_now[1], open_now[0])
        try:
            if handler_gate is not None:
                await handler_gate.wait()
            return request
        finally:
            open_now[0] -= 1

    server = grpc.aio.server(options=options)
    handler = grpc.unary_unary_rpc_method_handler(call)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.Echo", {"Call": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port, peers, open_now


async def test_a_server_allowing_one_stream_at_a_time_serves_every_concurrent_call() -> None:
    gate, called = asyncio.Event(), asyncio.Event()
    server, port, peers, open_now = await _strict_server(
        [("grpc.max_concurrent_streams", 1)], gate, called
    )
    client = Client(f"127.0.0.1:{port}", ChannelPolicy(proxy=False))
    try:
        # One call first, so the connection is up and the server's SETTINGS (its one-stream
        # limit) are known: before them HTTP/2 lets a client open any number of streams.
        gate.set()
        assert await client.unary(METHOD, b"first", timeout=30) == b"first"
        gate.clear()
        called.clear()
        calls = [asyncio.create_task(client.unary(METHOD, b"%d" % n, timeout=30)) for n in range(5)]
        await called.wait()  # one call is in the handler; the others wait for a stream
        gate.set()
        assert await asyncio.gather(*calls) == [b"%d" % n for n in range(5)]
        assert open_now[1] == 1 and len(peers) == 6 and len(set(peers)) == 1
    finally:
        await client.close()
        await server.stop(None)


async def test_keepalive_sends_no_ping_a_strict_server_would_punish() -> None:
    # A server that allows no PING without data (and ends the connection at the first strike):
    # idle gaps between calls, each far longer than the keepalive time, cost no connection.
    strict = [
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 300_000),
        ("grpc.http2.max_ping_strikes", 1),
    ]
    server, port, peers, _ = await _strict_server(strict)
    client = Client(f"127.0.0.1:{port}", ChannelPolicy(keepalive_time=0.05, proxy=False))
    try:
        for n in range(4):
            assert await client.unary(METHOD, b"%d" % n, timeout=30) == b"%d" % n
            await asyncio.sleep(0.3)  # time for keepalive to fire, were it to ping when idle
        assert len(set(peers)) == 1, peers
    finally:
        await client.close()
        await server.stop(None)
