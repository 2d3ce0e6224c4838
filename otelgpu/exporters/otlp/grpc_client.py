"""The `otlp` exporter's transport: `MetricsService/Export` as a unary gRPC call on a grpcio
channel (otelgpu.configgrpc: the shared channel policy).

Export is safe to send again with the same batch (a receiver keeps the last value of a
cumulative point, and a gauge's point is the same point): the retry loop does so for the
codes the OTLP specification calls retryable. grpcio itself never sends a call again
(otelgpu.configgrpc: its transparent retries are off)."""

from __future__ import annotations

import logging

from google.rpc.error_details_pb2 import RetryInfo  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceResponse,
)

from otelgpu import __version__
from otelgpu.component.errors import ExportError
from otelgpu.configgrpc import ChannelPolicy, Client, Credentials, Metadata, RpcError, StatusCode
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.tls import certificate_names, grpc_credentials, presented_certificate

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
_log = logging.getLogger("otelgpu.exporters.otlp")
EXPORT_METHOD = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
# An OTLP receiver's answer is a small message (a partial-success count and a text).
MAX_ANSWER = 64 * 2**10


class GrpcTransport:
    """Sends requests with `MetricsService/Export` on one grpcio channel, which reconnects by
    itself; when to send a failed request again is the retry loop's call."""

    def __init__(self, config: OtlpExporterConfig) -> None:
        self._config = config
        # gRPC metadata keys are lowercase on the wire (HTTP/2 header names).
        self._metadata: Metadata = tuple((k.lower(), v) for k, v in config.header_items())
        self._client: Client | None = None
        self._open = False
        self._credentials: Credentials | None = None
        self._told_plaintext = False  # the hint below, once per exporter

    async def open(self) -> None:
        """Reads the TLS files (a missing one refuses to start); the channel is made by the
        first export."""
        _, plaintext = self._config.target()
        tls = self._config.tls
        self._credentials = None if plaintext else grpc_credentials(tls)
        # A version range grpcio cannot hold to is warned about at load, with its position
        # (`OtlpExporterConfig.config_warnings`).
        self._open = True

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        if not self._open:
            raise ExportError("the gRPC channel is not open", retryable=False)
        client = self._client or await self._connect()
        try:
            raw = await client.unary(
                EXPORT_METHOD, request, timeout=timeout, metadata=self._metadata
            )
        except RpcError as err:
            if err.plaintext_server:
                self._tell_plaintext(client.target)
            raise classify(err.code, err.details, err.trailers) from None
        try:
            partial = ExportMetricsServiceResponse.FromString(raw).partial_success
        except Exception as exc:  # protobuf's DecodeError: the data was sent, the answer is bad
            return ExportResponse(0, f"an undecodable ExportMetricsServiceResponse: {exc}")
        return ExportResponse(partial.rejected_data_points, partial.error_message)

    async def close(self) -> None:
        client, self._client, self._open = self._client, None, False
        if client is not None:
            await client.close()

    async def _connect(self) -> Client:
        """The channel, made at the first export (a TLS server that skips verification is
        asked for its certificate then, so a server down at start delays nothing)."""
        target, _ = self._config.target()
        credentials = self._credentials
        if credentials is not None and self._config.tls.insecure_skip_verify:
            credentials = await self._presented(target, credentials)
        self._client = Client(
            target,
            ChannelPolicy(max_receive=MAX_ANSWER, user_agent=f"otelgpu/{__version__}"),
            credentials=credentials,
            compression=self._config.compression == "gzip",
        )
        return self._client

    def _tell_plaintext(self, target: str) -> None:
        """What to change when TLS met a plaintext receiver: every retry fails the same way,
        and the failure itself names only the handshake."""
        if self._told_plaintext:
            return
        self._told_plaintext = True
        _log.warning(
            "%s answers without TLS, and this endpoint asks for TLS (the default without a "
            "scheme): use http://%s for a plaintext receiver (or tls::insecure: true)",
            target,
            target,
        )

    async def _presented(self, target: str, credentials: Credentials) -> Credentials:
        tls = self._config.tls
        # grpcio always checks the server's certificate: trusting the one it presents is the
        # nearest it comes to skipping the check (a self-signed certificate; one a CA signed
        # is checked against the roots as usual).
        host, _, port = target.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")  # an IPv6 literal
        timeout = self._config.timeout
        name = tls.server_name_override
        try:
            pem = await presented_certificate(host, int(port), name, timeout)
        except (OSError, TimeoutError) as exc:
            raise ExportError(f"TLS to {target}: {exc}", retryable=True) from None
        names = await certificate_names(host, int(port), pem, name, timeout)
        if not names:
            return credentials
        return Credentials(pem, credentials.certificate_chain, credentials.private_key, names[0])


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
