"""The OTLP transports' failures, against real local servers: the error texts an export failure
logs (the method and URL of an HTTP status, the gRPC code), and what a transport that is not
open answers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from aiohttp import web
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceResponse,
)

from otelgpu.component.component import Kind
from otelgpu.component.errors import ExportError
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp import factory
from otelgpu.exporters.otlp.config import OtlpExporterConfig, OtlpHttpExporterConfig
from otelgpu.exporters.otlp.grpc_client import GrpcTransport
from otelgpu.exporters.otlp.http_client import HttpTransport
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.unit.exporters.otlp.batches import export_once, failed, numbered_batch


class Answer(metrics_service_pb2_grpc.MetricsServiceServicer):  # type: ignore[misc]
    """Accepts every request, or fails each with `code` and the text "bad batch"."""

    def __init__(self, code: grpc.StatusCode | None = None) -> None:
        self.code = code

    async def Export(self, request: Any, context: Any) -> ExportMetricsServiceResponse:
        if self.code is not None:
            await context.abort(self.code, "bad batch")
        return ExportMetricsServiceResponse()


async def _grpc_server(address: str, servicer: Answer) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port(address)
    await server.start()
    return server, port


# --- HTTP -----------------------------------------------------------------------------------


@pytest.fixture
async def http_300() -> AsyncIterator[str]:
    """An endpoint that answers every POST with 300 Multiple Choices."""

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=300)

    app = web.Application()
    app.router.add_post("/v1/metrics", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def test_an_http_300_is_a_failure_named_by_the_request_line(http_300: str) -> None:
    config = OtlpHttpExporterConfig.model_validate({"endpoint": http_300})
    with pytest.raises(ExportError) as caught:
        await export_once(HttpTransport(config))
    assert str(caught.value) == f"POST {http_300}/v1/metrics: HTTP 300"
    assert not caught.value.retryable


async def test_an_http_transport_closes_quietly_when_never_opened_or_closed_twice() -> None:
    config = OtlpHttpExporterConfig.model_validate({"endpoint": "http://127.0.0.1:1"})
    transport = HttpTransport(config)
    await transport.close()
    await transport.open()
    await transport.close()
    await transport.close()
    with pytest.raises(ExportError) as caught:
        await transport.export(b"", timeout=1)
    assert str(caught.value) == "the HTTP session is not open"
    assert not caught.value.retryable


# --- gRPC -----------------------------------------------------------------------------------


async def test_a_grpc_failure_is_logged_with_its_code_and_counted(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    server, port = await _grpc_server("127.0.0.1:0", Answer(grpc.StatusCode.INVALID_ARGUMENT))
    config = factory.config_type.model_validate(
        {
            "endpoint": f"127.0.0.1:{port}",
            "tls": {"insecure": True},
            "retry_on_failure": {"enabled": False},
        }
    )
    exporter = factory.create(make_settings("otlp", Kind.EXPORTER, telemetry), config)
    try:
        with caplog.at_level(logging.WARNING, logger="otelgpu"):
            await exporter.start(FakeHost(telemetry))
            await exporter.consume(numbered_batch(1, 3))
            await exporter.shutdown()
    finally:
        await server.stop(grace=None)
    messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith("export")]
    assert messages == ["export failed, dropping 3 points: gRPC INVALID_ARGUMENT: bad batch"]
    assert failed(telemetry, "otlp") == 3


async def test_a_grpc_transport_not_open_refuses_to_export() -> None:
    transport = GrpcTransport(
        OtlpExporterConfig.model_validate({"endpoint": "127.0.0.1:1", "tls": {"insecure": True}})
    )
    for _ in ("before open", "after close"):
        with pytest.raises(ExportError) as caught:
            await transport.export(b"", timeout=1)
        assert str(caught.value) == "the gRPC channel is not open"
        assert not caught.value.retryable
        await transport.open()
        await transport.close()
