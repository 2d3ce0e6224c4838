"""The `otlp` exporter's transport: the OTLP MetricsService stub over a `grpc.aio` channel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
from google.rpc.error_details_pb2 import RetryInfo  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceResponse,
)

from otelgpu.errors import ExportError
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.exporter import ExportResponse

# The codes the OTLP specification calls retryable; RESOURCE_EXHAUSTED only when the server
# says when to come back (RetryInfo), since otherwise it means "this will never fit".
RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.DATA_LOSS,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
    }
)
_STATUS_DETAILS = "grpc-status-details-bin"
# The method the generated MetricsServiceStub calls. Requests go out as the bytes the exporter
# encoded (no request serializer): the stub would want a message, parsed from those very bytes
# only to be serialized again.
EXPORT_METHOD = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"


class GrpcTransport:
    """Sends requests with `MetricsService/Export` over one long-lived channel."""

    def __init__(self, config: OtlpExporterConfig) -> None:
        self._config = config
        # gRPC metadata keys are lowercase on the wire; grpcio refuses uppercase ones.
        self._metadata = tuple((k.lower(), v) for k, v in config.header_items())
        self._channel: grpc.aio.Channel | None = None
        self._export: Any = None

    async def open(self) -> None:
        target, plaintext = self._config.target()
        compression = (
            grpc.Compression.Gzip
            if self._config.compression == "gzip"
            else grpc.Compression.NoCompression
        )
        options = self._channel_options()
        if plaintext:
            self._channel = grpc.aio.insecure_channel(target, options, compression)
        else:
            credentials = _credentials(self._config)
            self._channel = grpc.aio.secure_channel(target, credentials, options, compression)
        self._export = self._channel.unary_unary(
            EXPORT_METHOD, response_deserializer=ExportMetricsServiceResponse.FromString
        )

    def _channel_options(self) -> list[tuple[str, int | str]]:
        # Our own retry loop decides when to try again: gRPC's transparent retries are off,
        # and its reconnect backoff is kept shorter than our first wait so that a retry after
        # an outage finds the channel ready to connect instead of still backing off.
        backoff_ms = max(10, int(self._config.retry_on_failure.initial_interval * 500))
        options: list[tuple[str, int | str]] = [
            ("grpc.enable_retries", 0),
            ("grpc.initial_reconnect_backoff_ms", backoff_ms),
            ("grpc.min_reconnect_backoff_ms", backoff_ms),
            ("grpc.max_reconnect_backoff_ms", backoff_ms),
        ]
        if name := self._config.tls.server_name_override:
            # The certificate is checked against this name, and it is the :authority sent.
            options += [("grpc.ssl_target_name_override", name), ("grpc.default_authority", name)]
        return options

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        if self._export is None:
            raise ExportError("the gRPC channel is not open", retryable=False)
        try:
            response = await self._export(request, timeout=timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            raise classify(err.code(), err.details() or "", err.trailing_metadata()) from None
        partial = response.partial_success
        return ExportResponse(partial.rejected_data_points, partial.error_message)

    async def close(self) -> None:
        channel, self._channel, self._export = self._channel, None, None
        if channel is not None:
            await channel.close()


def classify(code: grpc.StatusCode, details: str, trailers: Any) -> ExportError:
    """The ExportError for a failed call: retryable per the OTLP spec, with RetryInfo's delay."""
    delay = retry_delay(trailers)
    retryable = code in RETRYABLE or (
        code is grpc.StatusCode.RESOURCE_EXHAUSTED and delay is not None
    )
    return ExportError(f"gRPC {code.name}: {details}", retryable=retryable, retry_after=delay)


def retry_delay(trailers: Any) -> float | None:
    """The delay of a `google.rpc.RetryInfo` in the call's status details, if any."""
    for key, value in trailers or ():
        if key != _STATUS_DETAILS or not isinstance(value, bytes):
            continue
        try:
            status = Status.FromString(value)
        except Exception:  # a peer's malformed details must not break error handling
            return None
        for detail in status.details:
            info = RetryInfo()
            if detail.Unpack(info):
                return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    return None


def _credentials(config: OtlpExporterConfig) -> grpc.ChannelCredentials:
    tls = config.tls
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file, tls.ca_pem),
        private_key=_read(tls.key_file, tls.key_pem_text()),
        certificate_chain=_read(tls.cert_file, tls.cert_pem),
    )


def _read(path: str, pem: str) -> bytes | None:
    """A file's bytes, or the `_pem` text given in its place (the config allows one)."""
    if path:
        return Path(path).read_bytes()
    return pem.encode() if pem else None
