"""TLS on both transports: the CA file is used, and an unknown certificate is refused."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceResponse,
)

from otelgpu.errors import ExportError
from otelgpu.exporters.otlp import encode
from otelgpu.exporters.otlp.config import OtlpExporterConfig, OtlpHttpExporterConfig
from otelgpu.exporters.otlp.exporter import ExportResponse, Transport
from otelgpu.exporters.otlp.grpc_client import GrpcTransport
from otelgpu.exporters.otlp.http_client import HttpTransport
from tests.peers.prometheus import self_signed_cert
from tests.unit.exporters.otlp.batches import numbered_batch


class Accept(metrics_service_pb2_grpc.MetricsServiceServicer):  # type: ignore[misc]
    async def Export(self, request: Any, context: Any) -> ExportMetricsServiceResponse:
        return ExportMetricsServiceResponse()


@pytest.fixture
def cert(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed_cert(tmp_path)


@pytest.fixture
async def grpc_tls(cert: tuple[Path, Path]) -> AsyncIterator[int]:
    cert_file, key_file = cert
    server = grpc.aio.server()
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Accept(), server)
    credentials = grpc.ssl_server_credentials([(key_file.read_bytes(), cert_file.read_bytes())])
    port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    yield port
    await server.stop(grace=None)


@pytest.fixture
async def https(cert: tuple[Path, Path]) -> AsyncIterator[int]:
    cert_file, key_file = cert
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    app = web.Application()
    app.router.add_post("/v1/metrics", _ok)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    yield runner.addresses[0][1]
    await runner.cleanup()


async def _ok(_: web.Request) -> web.Response:
    return web.Response(status=200)


async def _export(transport: Transport) -> ExportResponse:
    await transport.open()
    try:
        return await transport.export(encode(numbered_batch(0, 1)), timeout=5)
    finally:
        await transport.close()


async def test_grpc_verifies_the_server_with_the_ca_file(
    grpc_tls: int, cert: tuple[Path, Path]
) -> None:
    trusted = OtlpExporterConfig.model_validate(
        {"endpoint": f"localhost:{grpc_tls}", "tls": {"ca_file": str(cert[0])}}
    )
    assert await _export(GrpcTransport(trusted)) == ExportResponse()
    untrusted = OtlpExporterConfig(endpoint=f"localhost:{grpc_tls}")  # system roots only
    with pytest.raises(ExportError, match="UNAVAILABLE"):
        await _export(GrpcTransport(untrusted))


async def test_https_verifies_the_server_unless_told_not_to(
    https: int, cert: tuple[Path, Path]
) -> None:
    url = f"https://localhost:{https}"
    trusted = OtlpHttpExporterConfig.model_validate(
        {"endpoint": url, "tls": {"ca_file": str(cert[0])}}
    )
    assert await _export(HttpTransport(trusted)) == ExportResponse()
    with pytest.raises(ExportError, match="certificate"):
        await _export(HttpTransport(OtlpHttpExporterConfig(endpoint=url)))
    skip = OtlpHttpExporterConfig.model_validate(
        {"endpoint": url, "tls": {"insecure_skip_verify": True}}
    )
    assert await _export(HttpTransport(skip)) == ExportResponse()
