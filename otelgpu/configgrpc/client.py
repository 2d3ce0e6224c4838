"""One peer's gRPC channel and the call shapes the agent makes on it: a unary call, and a call
whose answer streams back message by message, with the request and the answers as bytes (the
callers encode and parse: the OTLP encoder writes the request's bytes itself, and the kubelet's
List answer is split before any pod is parsed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence

import grpc
import grpc.aio

from otelgpu.configgrpc.policy import ChannelPolicy, Credentials

StatusCode = grpc.StatusCode
Metadata = tuple[tuple[str, str | bytes], ...]

# Outcomes the connection may be to blame for: the call that meets one retires its channel, and
# the next call dials a new connection. grpcio keeps a connection for as long as it answers
# PINGs; a peer that floods PINGs while it stalls every call, or garbles its framing, would
# otherwise hold the channel for good. (UNAVAILABLE: the connection is gone or going away;
# DEADLINE_EXCEEDED: nothing came back in time on it; INTERNAL: it broke the protocol.)
REDIAL = frozenset({StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED, StatusCode.INTERNAL})
# A stream the server reset with REFUSED_STREAM was never processed (RFC 9113 8.7): a server
# at its stream limit answers so when a new stream overtakes the close of the last one, and on
# a busy machine that can happen to one call several times in a row while other calls take the
# freed stream. grpcio's own transparent retry is off (policy.py: it has no bound), so the call
# is sent again here, on the same connection, at most this many times, after a pause that
# doubles from REFUSED_PAUSE (5, 10, ... 160 ms: 315 ms in all) and only while the call's
# deadline leaves room for it: a server refusing every stream costs seven streams per call.
REFUSED_RETRIES = 6
REFUSED_PAUSE = 0.005
# grpcio's status detail for a stream reset with REFUSED_STREAM (HTTP/2 error code 7).
_REFUSED = "RST_STREAM with error code 7"
# BoringSSL's reason when the first bytes back from the server are no TLS record at all: the
# server speaks plaintext (an HTTP/2 SETTINGS frame, an HTTP/1 answer). grpcio puts it in the
# status of a call that never got past the handshake.
_NOT_TLS = "WRONG_VERSION_NUMBER"


class RpcError(Exception):
    """A call that did not end OK: its code, the server's message (or grpcio's, when the call
    never reached the server) and the trailing metadata (`-bin` values as bytes)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: Metadata = ()) -> None:
        self.code = code
        self.details = details
        self.trailers = trailers
        super().__init__(f"{code.name}: {details}" if details else code.name)

    @property
    def plaintext_server(self) -> bool:
        """The TLS handshake failed because the server answered in plaintext."""
        return self.code is StatusCode.UNAVAILABLE and _NOT_TLS in self.details


class Client:
    """Unary and server-streaming calls to one peer. The channel is made by the first call, on
    the running event loop, and kept: grpcio reconnects it when the connection is lost. A
    stream the server refused unread is sent again (`REFUSED_RETRIES`). A call that fails with
    a code in `REDIAL` retires the channel: later calls open a new one, and the retired one is
    closed when its last call in flight ends. Use it from one loop."""

    def __init__(
        self,
        target: str,
        policy: ChannelPolicy,
        *,
        credentials: Credentials | None = None,
        compression: bool = False,
    ) -> None:
        self._target = target
        self._policy = policy
        self._credentials = credentials
        self._compression = grpc.Compression.Gzip if compression else None
        self._channel: grpc.aio.Channel | None = None
        self._in_flight: dict[grpc.aio.Channel, int] = {}  # calls open on each channel
        self._retired: set[grpc.aio.Channel] = set()  # closed when their last call ends

    @property
    def target(self) -> str:
        return self._target

    async def unary(
        self, method: str, request: bytes, *, timeout: float, metadata: Metadata = ()
    ) -> bytes:
        """The answer's bytes to `request` on `method` (`/package.Service/Method`); raises
        `RpcError` for any other outcome, DEADLINE_EXCEEDED when `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        pause = 0.0
        for attempt in range(REFUSED_RETRIES + 1):
            if pause:
                await asyncio.sleep(pause)
            channel = self._connected()
            self._in_flight[channel] = self._in_flight.get(channel, 0) + 1
            try:
                answer = await channel.unary_unary(method)(
                    request,
                    timeout=max(deadline - time.monotonic(), 0.0),
                    metadata=_grpc_metadata(metadata),
                    compression=self._compression,
                )
                break
            except grpc.aio.AioRpcError as exc:
                pause = self._resend_or_raise(exc, channel, attempt, deadline, unread=True)
            finally:
                await self._release(channel)
        if not isinstance(answer, bytes):  # no deserializer: grpcio hands the bytes over
            raise RpcError(StatusCode.INTERNAL, f"an answer of type {type(answer).__name__}")
        return answer

    async def stream(
        self, method: str, request: bytes, *, timeout: float, metadata: Metadata = ()
    ) -> AsyncGenerator[bytes, None]:
        """The answer's messages to `request` on `method`, each as bytes as it arrives; raises
        `RpcError` for an outcome other than OK, DEADLINE_EXCEEDED when `timeout` seconds pass
        before the last message. The channel's receive limit holds for each message, not for
        the whole answer. A consumer that stops early closes the generator (`aclosing`): the
        call is cancelled, the connection kept. A refused stream is sent again as a unary call
        is: the server refused it before any message, so nothing was read twice."""
        deadline = time.monotonic() + timeout
        pause = 0.0
        for attempt in range(REFUSED_RETRIES + 1):
            if pause:
                await asyncio.sleep(pause)
            channel = self._connected()
            self._in_flight[channel] = self._in_flight.get(channel, 0) + 1
            call = channel.unary_stream(method)(
                request,
                timeout=max(deadline - time.monotonic(), 0.0),
                metadata=_grpc_metadata(metadata),
                compression=self._compression,
            )
            received = False
            try:
                async for answer in call:
                    if not isinstance(answer, bytes):  # no deserializer: bytes are handed over
                        raise RpcError(
                            StatusCode.INTERNAL, f"an answer of type {type(answer).__name__}"
                        )
                    received = True
                    yield answer
                return
            except grpc.aio.AioRpcError as exc:
                pause = self._resend_or_raise(exc, channel, attempt, deadline, unread=not received)
            finally:
                call.cancel()  # a no-op once the call has ended
                await self._release(channel)

    def _resend_or_raise(
        self,
        exc: grpc.aio.AioRpcError,
        channel: grpc.aio.Channel,
        attempt: int,
        deadline: float,
        *,
        unread: bool,
    ) -> float:
        """The pause before sending a call again that the server refused `unread` (never
        processed: sent again on the same connection); for any other failure, retires the
        channel where `REDIAL` says so and raises it as `RpcError`."""
        details = exc.details() or ""
        refused = unread and exc.code() is StatusCode.UNAVAILABLE and _REFUSED in details
        pause = _resend_pause(attempt, deadline) if refused else 0.0
        if pause:
            return pause
        if exc.code() in REDIAL:
            self._retire(channel)
        raise RpcError(exc.code(), details, _metadata(exc.trailing_metadata())) from None

    async def close(self) -> None:
        """Closes the channel and any retired one (calls in flight are cancelled); the next
        call opens a new one."""
        channels = [self._channel, *self._retired]
        self._channel = None
        self._retired.clear()
        for channel in channels:
            if channel is not None:
                await channel.close(grace=None)

    def _retire(self, channel: grpc.aio.Channel) -> None:
        if channel is self._channel:
            self._channel = None
            self._retired.add(channel)

    async def _release(self, channel: grpc.aio.Channel) -> None:
        """One call on `channel` ended: a retired channel is closed with its last call."""
        left = self._in_flight[channel] - 1
        if left:
            self._in_flight[channel] = left
            return
        del self._in_flight[channel]
        if channel in self._retired:
            self._retired.discard(channel)
            await channel.close(grace=None)

    def _connected(self) -> grpc.aio.Channel:
        if self._channel is None:
            options = self._policy.options(self._credentials)
            if self._credentials is None:
                self._channel = grpc.aio.insecure_channel(self._target, options=options)
            else:
                self._channel = grpc.aio.secure_channel(
                    self._target, _ssl_credentials(self._credentials), options=options
                )
        return self._channel


def _ssl_credentials(credentials: Credentials) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=credentials.root_certificates,
        private_key=credentials.private_key,
        certificate_chain=credentials.certificate_chain,
    )


def _grpc_metadata(metadata: Metadata) -> Sequence[tuple[str, str | bytes]] | None:
    return tuple(metadata) or None


def _metadata(metadata: object) -> Metadata:
    """grpcio's trailing metadata (a sequence of key/value pairs, or None) as a tuple."""
    if metadata is None:
        return ()
    pairs: list[tuple[str, str | bytes]] = []
    for item in metadata:  # type: ignore[attr-defined]
        key, value = item
        pairs.append((str(key), value if isinstance(value, bytes) else str(value)))
    return tuple(pairs)


def _resend_pause(attempt: int, deadline: float) -> float:
    """How long to wait before sending a refused call again (0: not again): the attempt's
    pause when another attempt is allowed and the deadline leaves room for it."""
    if attempt >= REFUSED_RETRIES:
        return 0.0
    pause = REFUSED_PAUSE * 2**attempt
    return pause if time.monotonic() + pause < deadline else 0.0
