"""One peer's gRPC channel and the one call shape the agent makes on it: a unary call with the
request and the answer as bytes (the callers encode and parse: the OTLP encoder writes the
request's bytes itself, and the kubelet's List answer is split before any pod is parsed)."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import grpc.aio

from otelgpu.configgrpc.policy import ChannelPolicy, Credentials

StatusCode = grpc.StatusCode
Metadata = tuple[tuple[str, str | bytes], ...]


class RpcError(Exception):
    """A call that did not end OK: its code, the server's message (or grpcio's, when the call
    never reached the server) and the trailing metadata (`-bin` values as bytes)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: Metadata = ()) -> None:
        self.code = code
        self.details = details
        self.trailers = trailers
        super().__init__(f"{code.name}: {details}" if details else code.name)


class Client:
    """Unary calls to one peer. The channel is made by the first call, on the running event
    loop, and kept: grpcio reconnects it when the connection is lost. Use it from one loop."""

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

    @property
    def target(self) -> str:
        return self._target

    async def unary(
        self, method: str, request: bytes, *, timeout: float, metadata: Metadata = ()
    ) -> bytes:
        """The answer's bytes to `request` on `method` (`/package.Service/Method`); raises
        `RpcError` for any other outcome, DEADLINE_EXCEEDED when `timeout` seconds pass first."""
        call = self._connected().unary_unary(method)
        try:
            answer = await call(
                request,
                timeout=timeout,
                metadata=_grpc_metadata(metadata),
                compression=self._compression,
            )
        except grpc.aio.AioRpcError as exc:
            raise RpcError(
                exc.code(), exc.details() or "", _metadata(exc.trailing_metadata())
            ) from None
        if not isinstance(answer, bytes):  # no deserializer: grpcio hands the bytes over
            raise RpcError(StatusCode.INTERNAL, f"an answer of type {type(answer).__name__}")
        return answer

    async def close(self) -> None:
        """Closes the channel (calls in flight are cancelled); the next call opens a new one."""
        channel, self._channel = self._channel, None
        if channel is not None:
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
