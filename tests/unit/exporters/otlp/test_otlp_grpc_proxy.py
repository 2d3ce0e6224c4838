"""`otlp` (gRPC) through an HTTP proxy: grpcio reads `grpc_proxy`, `https_proxy`, `http_proxy`
and `no_proxy`, and tunnels with CONNECT. The proxy (test_otlp_http_proxy.Proxy) sends every
tunnel to the local receiver, so an endpoint that resolves nowhere is reached only through it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc

from otelgpu.component.errors import ExportError
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.encode import encode_bytes
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.grpc_client import GrpcTransport
from tests.unit.exporters.otlp.batches import numbered_batch
from tests.unit.exporters.otlp.test_otlp_grpc import Servicer
from tests.unit.exporters.otlp.test_otlp_http_proxy import NOWHERE, Proxy

PROXY_VARIABLES = ("grpc_proxy", "https_proxy", "http_proxy", "no_proxy", "no_grpc_proxy")


@pytest.fixture
async def proxied(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Servicer, Proxy]]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    servicer = Servicer()
    server = grpc.aio.server()
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    proxy = Proxy(port)
    await proxy.start()
    yield servicer, proxy
    await proxy.close()
    await server.stop(grace=None)


async def _export(endpoint: str) -> ExportResponse:
    config = OtlpExporterConfig.model_validate({"endpoint": endpoint, "tls": {"insecure": True}})
    transport = GrpcTransport(config)
    await transport.open()
    try:
        return await transport.export(encode_bytes(numbered_batch(3, 1)), timeout=10)
    finally:
        await transport.close()


async def test_https_proxy_carries_the_export_through_a_connect_tunnel(
    proxied: tuple[Servicer, Proxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, proxy = proxied
    monkeypatch.setenv("https_proxy", proxy.url)
    assert await _export(f"{NOWHERE}:4317") == ExportResponse()
    assert proxy.tunnels == [f"{NOWHERE}:4317"]


async def test_no_proxy_names_the_hosts_dialled_directly(
    proxied: tuple[Servicer, Proxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, proxy = proxied
    monkeypatch.setenv("https_proxy", proxy.url)
    monkeypatch.setenv("no_proxy", f"localhost,{NOWHERE}")
    with pytest.raises(ExportError):  # dialled directly: the name resolves nowhere
        await _export(f"{NOWHERE}:4317")
    assert proxy.tunnels == []
