"""Unary gRPC calls over one HTTP/2 connection (the `h2` protocol library on asyncio streams).

Every peer the agent dials with gRPC (the kubelet's pod-resources socket, containerd's socket, an
OTLP endpoint) is asked one request for one answer. That needs the gRPC framing (a 5-byte prefix
per message, the status in the trailers) on an HTTP/2 stream, and no more: this package is that
(`connection.py` the HTTP/2 side, `frames.py` the messages, `status.py` the outcomes), in about
10 MiB less memory than a gRPC runtime with its own threads and code (P3).

The connection is dialled by the first call and again by the first call after it was lost; a
failed dial fails that call (UNAVAILABLE) at once (a unix socket that refuses is dialled a few
more times within 0.17 s first: its daemon may be between bind and listen), and the caller's own
refresh or retry loop decides when to try again. A call refused before the server began it
(GOAWAY, REFUSED_STREAM) is sent once more on a fresh connection, as gRPC's transparent retry
does.
"""

from __future__ import annotations

import asyncio

from otelgpu.rpc.connection import DEFAULT_MAX_RECEIVE, Address, Connection, Refused
from otelgpu.rpc.frames import Body
from otelgpu.rpc.status import Metadata, RpcError, StatusCode


class Channel:
    """Unary calls to one peer over a long-lived HTTP/2 connection. Use it from one event loop."""

    def __init__(
        self,
        address: Address,
        *,
        authority: str = "",
        max_receive: int = DEFAULT_MAX_RECEIVE,
        compress: bool = False,
        user_agent: str = "otelgpu",
    ) -> None:
        self._address = address
        self._authority = authority or (
            "localhost" if address.path else f"{address.host}:{address.port}"
        )
        self._max_receive = max_receive
        self._compress = compress
        self._user_agent = user_agent
        self._connection: Connection | None = None
        self._dialling = asyncio.Lock()  # concurrent first calls share one dial

    async def unary(
        self, method: str, request: bytes, *, timeout: float, metadata: Metadata = ()
    ) -> bytes:
        """The answer's bytes to `request` on `method` (`/package.Service/Method`); raises
        `RpcError` for any other outcome, DEADLINE_EXCEEDED when `timeout` seconds pass first."""
        headers = self._headers(method, timeout, metadata)
        body = Body(request, self._compress)
        try:
            async with asyncio.timeout(timeout):
                for attempt in (1, 2):
                    connection = await self._connected()
                    try:
                        return await connection.call(headers, body, self._max_receive)
                    except Refused as exc:
                        if attempt == 2:
                            raise RpcError(StatusCode.UNAVAILABLE, str(exc)) from None
                raise AssertionError("unreachable")
        except TimeoutError:
            raise RpcError(
                StatusCode.DEADLINE_EXCEEDED, f"no answer from {self._address} in {timeout:g}s"
            ) from None

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _connected(self) -> Connection:
        async with self._dialling:
            if self._connection is not None and self._connection.usable:
                return self._connection
            stale, self._connection = self._connection, None
            if stale is not None and stale.idle:  # else it closes after its last call
                await stale.close()
            self._connection = await Connection.dial(self._address)
            return self._connection

    def _headers(self, method: str, timeout: float, metadata: Metadata) -> list[tuple[str, str]]:
        headers = [
            (":method", "POST"),
            (":scheme", "https" if self._address.tls else "http"),
            (":path", method),
            (":authority", self._authority),
            ("te", "trailers"),
            ("content-type", "application/grpc"),
            ("user-agent", self._user_agent),
            # The server learns the deadline too, so it can stop work nobody waits for.
            ("grpc-timeout", f"{max(1, min(int(timeout * 1000), 99_999_999))}m"),
        ]
        if self._compress:
            headers.append(("grpc-encoding", "gzip"))
        headers += [(k, v if isinstance(v, str) else v.decode("latin-1")) for k, v in metadata]
        return headers
