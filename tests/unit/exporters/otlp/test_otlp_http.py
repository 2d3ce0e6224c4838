"""The HTTP transport against an aiohttp test server: statuses, Retry-After, body, headers."""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsPartialSuccess,
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

from otelgpu.component.component import Kind
from otelgpu.component.errors import ExportError
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp import encode, http_factory
from otelgpu.exporters.otlp.config import OtlpHttpExporterConfig
from otelgpu.exporters.otlp.encode import encode_bytes
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.http_client import HttpTransport, parse_retry_after
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.unit.exporters.otlp.batches import failed, numbered_batch, sent

SECRET = "Bearer s3cret-token"


class Receiver:
    """Records each POST (headers, decoded request) and answers with the next scripted reply."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.script: list[tuple[int, dict[str, str], bytes]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()  # aiohttp undoes the Content-Encoding itself
        self.requests.append(ExportMetricsServiceRequest.FromString(body))
        self.headers.append(dict(request.headers))
        status, headers, payload = self.script.pop(0) if self.script else (200, {}, b"")
        return web.Response(status=status, headers=headers, body=payload)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/v1/metrics", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield rec, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def _export(endpoint: str, **options: Any) -> ExportResponse:
    config = OtlpHttpExporterConfig.model_validate({"endpoint": endpoint, **options})
    transport = HttpTransport(config)
    await transport.open()
    try:
        return await transport.export(encode_bytes(numbered_batch(3, 2)), timeout=5)
    finally:
        await transport.close()


@pytest.mark.parametrize("compression", ["gzip", "none"])
async def test_body_is_the_protobuf_request_with_headers(
    receiver: tuple[Receiver, str], compression: str
) -> None:
    rec, endpoint = receiver
    headers = {"Authorization": SECRET, "X-Scope-OrgID": "team-a"}
    assert await _export(endpoint, compression=compression, headers=headers) == ExportResponse()
    assert rec.requests == [encode(numbered_batch(3, 2))]
    sent_headers = rec.headers[0]
    assert sent_headers["Content-Type"] == "application/x-protobuf"
    raw = encode(numbered_batch(3, 2)).SerializeToString()
    if compression == "gzip":
        assert sent_headers["Content-Encoding"] == "gzip"
        assert int(sent_headers["Content-Length"]) == len(gzip.compress(raw, 6, mtime=0))
    else:
        assert "Content-Encoding" not in sent_headers
        assert int(sent_headers["Content-Length"]) == len(raw)
    assert (sent_headers["Authorization"], sent_headers["X-Scope-OrgID"]) == (SECRET, "team-a")


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(429, True), (502, True), (503, True), (504, True)]
    + [(s, False) for s in (400, 401, 403, 404, 413, 500, 501)],
)
async def test_only_the_specs_statuses_are_retryable(
    receiver: tuple[Receiver, str], status: int, retryable: bool
) -> None:
    rec, endpoint = receiver
    body = Status(code=3, message="bad things").SerializeToString()
    rec.script = [(status, {"Retry-After": "7"}, body)]
    with pytest.raises(ExportError) as caught:
        await _export(endpoint, headers={"Authorization": SECRET})
    assert caught.value.retryable is retryable
    assert caught.value.retry_after == (7.0 if retryable else None)
    assert f"HTTP {status}: bad things" in str(caught.value)
    assert "s3cret" not in str(caught.value)


async def test_partial_success_and_a_non_protobuf_error_body(
    receiver: tuple[Receiver, str],
) -> None:
    rec, endpoint = receiver
    partial = ExportMetricsServiceResponse(
        partial_success=ExportMetricsPartialSuccess(rejected_data_points=2, error_message="dup")
    )
    rec.script = [(200, {}, partial.SerializeToString()), (503, {}, b"<html>busy</html>")]
    assert await _export(endpoint) == ExportResponse(2, "dup")
    with pytest.raises(ExportError, match=r"HTTP 503$") as caught:
        await _export(endpoint)
    assert caught.value.retryable and caught.value.retry_after is None


async def test_a_refused_connection_is_retryable() -> None:
    with pytest.raises(ExportError, match=r"127\.0\.0\.1:1") as caught:
        await _export("http://127.0.0.1:1")
    assert caught.value.retryable


def test_retry_after_forms() -> None:
    assert parse_retry_after("120") == 120.0
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after(date, now=1_000_000) == 30.0
    assert parse_retry_after(date, now=2_000_000) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


async def test_exporter_honours_retry_after_and_delivers(
    receiver: tuple[Receiver, str], telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    rec, endpoint = receiver
    rec.script = [(503, {"Retry-After": "0"}, b""), (429, {}, b"")]
    config = http_factory.config_type.model_validate(
        {
            "endpoint": endpoint,
            "headers": {"Authorization": SECRET},
            "retry_on_failure": {"initial_interval": "10ms", "max_interval": "20ms"},
        }
    )
    exporter = http_factory.create(make_settings("otlp_http", Kind.EXPORTER, telemetry), config)
    with caplog.at_level(logging.DEBUG):
        await exporter.start(FakeHost(telemetry))
        await exporter.consume(numbered_batch(1, 5))
        async with asyncio.timeout(10):
            while len(rec.requests) < 3:
                await asyncio.sleep(0.01)
        await exporter.shutdown()
    assert (sent(telemetry, "otlp_http"), failed(telemetry, "otlp_http")) == (5, 0)
    assert "s3cret" not in caplog.text
    assert "HTTP 503" in caplog.text  # the first failure is logged, once
