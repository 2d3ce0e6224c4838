"""The `otlp_http` exporter's transport: binary protobuf POSTed with an aiohttp session.

opentelemetry-exporter-otlp-proto-http is built on blocking `requests`, which would stall the
event loop, so the request body is the exporter's own encoding (`encode.encode_bytes`) and
only the HTTP client is aiohttp.
"""

from __future__ import annotations

import email.utils
import gzip
import ssl
import time

import aiohttp
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceResponse,
)

from otelgpu.errors import ExportError
from otelgpu.exporters.otlp.config import OtlpHttpExporterConfig
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.tls import ssl_context

# The OTLP/HTTP specification's retryable statuses; every other error status is permanent.
RETRYABLE = frozenset({429, 502, 503, 504})
_PROTOBUF = "application/x-protobuf"
# gzip's default level 9 costs several times level 6 for a few percent on metric payloads.
_GZIP_LEVEL = 6


class HttpTransport:
    """POSTs each request to `<endpoint>/v1/metrics` over one pooled session."""

    def __init__(self, config: OtlpHttpExporterConfig) -> None:
        self._config = config
        self._url = config.url()
        self._gzip = config.compression == "gzip"
        self._headers = {k: v for k, v in config.header_items()}
        self._headers["Content-Type"] = _PROTOBUF
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._session: aiohttp.ClientSession | None = None
        # The name the server's certificate is checked against, and sent in SNI.
        self._server_name = config.tls.server_name_override or None

    async def open(self) -> None:
        tls: ssl.SSLContext | bool = True
        if self._url.startswith("https://"):
            tls = ssl_context(self._config.tls)
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls))

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        if self._session is None:
            raise ExportError("the HTTP session is not open", retryable=False)
        body = request
        if self._gzip:
            body = gzip.compress(body, compresslevel=_GZIP_LEVEL, mtime=0)
        try:
            async with self._session.post(
                self._url,
                data=body,
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
                server_hostname=self._server_name,
            ) as response:
                payload = await response.read()
                status, retry_after = response.status, response.headers.get("Retry-After")
        except (TimeoutError, aiohttp.ClientError) as err:
            # Connection refused, reset or timed out: the endpoint may well come back.
            raise ExportError(
                f"POST {self._url}: {type(err).__name__} {err}", retryable=True
            ) from None
        if 200 <= status < 300:
            return _accepted(payload)
        raise ExportError(
            f"POST {self._url}: HTTP {status}{_status_message(payload)}",
            retryable=status in RETRYABLE,
            retry_after=parse_retry_after(retry_after) if status in RETRYABLE else None,
        )

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _accepted(payload: bytes) -> ExportResponse:
    try:
        partial = ExportMetricsServiceResponse.FromString(payload).partial_success
    except Exception:  # a 2xx with a body we cannot read still means "accepted"
        return ExportResponse()
    return ExportResponse(partial.rejected_data_points, partial.error_message)


def _status_message(payload: bytes) -> str:
    """`: <message>` from a google.rpc.Status error body, or nothing."""
    try:
        message = Status.FromString(payload).message
    except Exception:  # not protobuf (a proxy's HTML page): say nothing rather than guess
        return ""
    return f": {message[:200]}" if message else ""


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delay-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
