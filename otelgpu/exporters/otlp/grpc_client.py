"""The `otlp` exporter's transport: `MetricsService/Export` as a unary gRPC call over one
long-lived HTTP/2 connection (otelgpu.rpc)."""

from __future__ import annotations

import ssl

from google.rpc.error_details_pb2 import RetryInfo  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceResponse,
)

from otelgpu import __version__
from otelgpu.errors import ExportError
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.tls import ssl_context
from otelgpu.rpc import Address, Channel, Metadata, RpcError, StatusCode

# The codes the OTLP specification calls retryable; RESOURCE_EXHAUSTED only when the server
# says when to come back (RetryInfo), since otherwise it means "this will never fit".
RETRYABLE = frozenset(
    {
        StatusCode.UNAVAILABLE,
        StatusCode.ABORTED,
        StatusCode.OUT_OF_RANGE,
        StatusCode.DATA_LOSS,
        StatusCode.DEADLINE_EXCEEDED,
        StatusCode.CANCELLED,
    }
)
_STATUS_DETAILS = "grpc-status-details-bin"
EXPORT_METHOD = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
# An OTLP receiver's answer is a small message; the Collector's receivers accept 4 MiB answers.
_MAX_ANSWER = 4 * 2**20


class GrpcTransport:
    """Sends requests with `MetricsService/Export` over one long-lived connection. A lost
    connection is dialled again by the next request; when to send it is the retry loop's call."""

    def __init__(self, config: OtlpExporterConfig) -> None:
        self._config = config
        # gRPC metadata keys are lowercase on the wire (HTTP/2 header names).
        self._metadata: Metadata = tuple((k.lower(), v) for k, v in config.header_items())
        self._channel: Channel | None = None

    async def open(self) -> None:
        target, plaintext = self._config.target()
        host, _, port = target.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")  # an IPv6 literal
        name = self._config.tls.server_name_override
        address = Address(
            host=host,
            port=int(port),
            tls=None if plaintext else _tls_context(self._config),
            server_hostname=name,
        )
        self._channel = Channel(
            address,
            # The certificate is checked against the override, and it is the :authority sent.
            authority=name or target,
            max_receive=_MAX_ANSWER,
            compress=self._config.compression == "gzip",
            user_agent=f"otelgpu/{__version__}",
        )

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        if self._channel is None:
            raise ExportError("the gRPC channel is not open", retryable=False)
        try:
            raw = await self._channel.unary(
                EXPORT_METHOD, request, timeout=timeout, metadata=self._metadata
            )
        except RpcError as err:
            raise classify(err.code, err.details, err.trailers) from None
        try:
            partial = ExportMetricsServiceResponse.FromString(raw).partial_success
        except Exception as exc:  # protobuf's DecodeError: the data was sent, the answer is bad
            return ExportResponse(0, f"an undecodable ExportMetricsServiceResponse: {exc}")
        return ExportResponse(partial.rejected_data_points, partial.error_message)

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()


def classify(code: StatusCode, details: str, trailers: Metadata) -> ExportError:
    """The ExportError for a failed call: retryable per the OTLP spec, with RetryInfo's delay."""
    delay = retry_delay(trailers)
    retryable = code in RETRYABLE or (code is StatusCode.RESOURCE_EXHAUSTED and delay is not None)
    return ExportError(f"gRPC {code.name}: {details}", retryable=retryable, retry_after=delay)


def retry_delay(trailers: Metadata) -> float | None:
    """The delay of a `google.rpc.RetryInfo` in the call's status details, if any."""
    for key, value in trailers:
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


def _tls_context(config: OtlpExporterConfig) -> ssl.SSLContext:
    """The `tls` settings' context, speaking HTTP/2 (ALPN h2), which needs TLS 1.2 or later."""
    context = ssl_context(config.tls, floor="1.2")
    context.set_alpn_protocols(["h2"])
    return context
