"""The gRPC transport against an in-process grpc.aio MetricsService: codes, RetryInfo, metadata."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf.any_pb2 import Any as AnyProto
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsPartialSuccess,
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

from otelgpu import __version__
from otelgpu.component.component import Kind
from otelgpu.component.errors import ExportError
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp import factory
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.encode import encode_bytes
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.grpc_client import GrpcTransport, retry_delay
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.peers.certs import issue
from tests.peers.relay import CountingRelay
from tests.unit.exporters.otlp.batches import failed, numbered_batch, sent

FAST_RETRY = {"initial_interval": "10ms", "max_interval": "20ms", "max_elapsed_time": "5s"}


class Abort:
    """A scripted failure: the status code, and the RetryInfo delay to attach (if any)."""

    def __init__(self, code: grpc.StatusCode, retry_delay: float | None = None) -> None:
        self.code = code
        self.retry_delay = retry_delay


class Servicer(metrics_service_pb2_grpc.MetricsServiceServicer):  # type: ignore[misc]
    """Records each request with its metadata and answers with the next scripted action."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.metadata: list[dict[str, str]] = []
        self.script: list[Any] = []

    async def Export(self, request: ExportMetricsServiceRequest, context: Any) -> Any:
        self.requests.append(request)
        self.metadata.append({k: v for k, v in context.invocation_metadata()})
        action = self.script.pop(0) if self.script else ExportMetricsServiceResponse()
        if isinstance(action, float):  # a slow server
            await asyncio.sleep(action)
            return ExportMetricsServiceResponse()
        if isinstance(action, Abort):
            if action.retry_delay is not None:
                context.set_trailing_metadata(
                    (("grpc-status-details-bin", _status_with_retry_info(action)),)
                )
            await context.abort(action.code, "scripted failure")
        return action


def _status_with_retry_info(action: Abort) -> bytes:
    info = RetryInfo(retry_delay=Duration(seconds=int(action.retry_delay or 0), nanos=500_000_000))
    detail = AnyProto()
    detail.Pack(info)
    status = Status(code=action.code.value[0], message="slow down", details=[detail])
    return status.SerializeToString()


@pytest.fixture
async def server() -> AsyncIterator[tuple[Servicer, str]]:
    servicer = Servicer()
    srv = grpc.aio.server()
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    yield servicer, f"127.0.0.1:{port}"
    await srv.stop(grace=None)


async def _transport(endpoint: str, **options: Any) -> GrpcTransport:
    config = OtlpExporterConfig.model_validate(
        {"endpoint": endpoint, "tls": {"insecure": True}, **options}
    )
    transport = GrpcTransport(config)
    await transport.open()
    return transport


def _request() -> bytes:
    return encode_bytes(numbered_batch(7, 2))


RETRYABLE_CODES = {
    "UNAVAILABLE",
    "ABORTED",
    "OUT_OF_RANGE",
    "DATA_LOSS",
    "DEADLINE_EXCEEDED",
    "CANCELLED",
}


@pytest.mark.parametrize("code", [c for c in grpc.StatusCode if c is not grpc.StatusCode.OK])
async def test_only_the_specs_codes_are_retryable(
    server: tuple[Servicer, str], code: grpc.StatusCode
) -> None:
    servicer, endpoint = server
    servicer.script = [Abort(code)]
    transport = await _transport(endpoint)
    try:
        with pytest.raises(ExportError) as caught:
            await transport.export(_request(), timeout=5)
    finally:
        await transport.close()
    assert caught.value.retryable == (code.name in RETRYABLE_CODES), code
    assert caught.value.retry_after is None
    assert code.name in str(caught.value)


async def test_resource_exhausted_is_retryable_only_with_retry_info(
    server: tuple[Servicer, str],
) -> None:
    servicer, endpoint = server
    servicer.script = [Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_delay=2)]
    transport = await _transport(endpoint)
    try:
        with pytest.raises(ExportError) as caught:
            await transport.export(_request(), timeout=5)
    finally:
        await transport.close()
    assert caught.value.retryable and caught.value.retry_after == 2.5


async def test_request_metadata_partial_success_and_compression(
    server: tuple[Servicer, str],
) -> None:
    servicer, endpoint = server
    servicer.script = [
        ExportMetricsServiceResponse(
            partial_success=ExportMetricsPartialSuccess(
                rejected_data_points=1, error_message="NaN refused"
            )
        )
    ]
    headers = {"X-Scope-OrgID": "team-a", "authorization": "Bearer s3cret"}
    for compression in ("gzip", "none"):
        transport = await _transport(endpoint, headers=headers, compression=compression)
        try:
            response = await transport.export(_request(), timeout=5)
        finally:
            await transport.close()
        assert servicer.requests[-1] == ExportMetricsServiceRequest.FromString(_request())
        assert servicer.metadata[-1]["x-scope-orgid"] == "team-a"
        assert servicer.metadata[-1]["authorization"] == "Bearer s3cret"
    assert response == ExportResponse()
    assert servicer.requests and len(servicer.requests) == 2


async def test_partial_success_is_reported(server: tuple[Servicer, str]) -> None:
    servicer, endpoint = server
    partial = ExportMetricsPartialSuccess(rejected_data_points=1, error_message="NaN refused")
    servicer.script = [ExportMetricsServiceResponse(partial_success=partial)]
    transport = await _transport(endpoint)
    try:
        assert await transport.export(_request(), timeout=5) == ExportResponse(1, "NaN refused")
    finally:
        await transport.close()


async def test_unreachable_and_slow_endpoints_are_retryable(server: tuple[Servicer, str]) -> None:
    servicer, endpoint = server
    servicer.script = [0.5]
    slow = await _transport(endpoint)
    closed = await _transport("127.0.0.1:1")
    try:
        with pytest.raises(ExportError, match="DEADLINE_EXCEEDED") as late:
            await slow.export(_request(), timeout=0.05)
        with pytest.raises(ExportError, match="UNAVAILABLE") as down:
            await closed.export(_request(), timeout=5)
    finally:
        await slow.close()
        await closed.close()
    assert late.value.retryable and down.value.retryable


async def test_exporter_retries_over_grpc_until_accepted(
    server: tuple[Servicer, str], telemetry: SelfTelemetry
) -> None:
    servicer, endpoint = server
    servicer.script = [Abort(grpc.StatusCode.UNAVAILABLE), Abort(grpc.StatusCode.ABORTED)]
    config = factory.config_type.model_validate(
        {"endpoint": endpoint, "tls": {"insecure": True}, "retry_on_failure": FAST_RETRY}
    )
    exporter = factory.create(make_settings("otlp", Kind.EXPORTER, telemetry), config)
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(numbered_batch(1, 3))
    await exporter.consume(numbered_batch(2, 4))
    async with asyncio.timeout(10):
        while len(servicer.requests) < 4:  # two failures, then both batches
            await asyncio.sleep(0.01)
    await exporter.shutdown()
    seqs = [r.resource_metrics[0].resource.attributes[0].value.int_value for r in servicer.requests]
    assert seqs == [1, 1, 1, 2]
    assert (sent(telemetry, "otlp"), failed(telemetry, "otlp")) == (7, 0)


async def test_a_missing_ca_file_refuses_to_start(telemetry: SelfTelemetry, tmp_path: Any) -> None:
    config = factory.config_type.model_validate(
        {"endpoint": "gw:4317", "tls": {"ca_file": str(tmp_path / "missing.pem")}}
    )
    exporter = factory.create(make_settings("otlp", Kind.EXPORTER, telemetry), config)
    with pytest.raises(FileNotFoundError):
        await exporter.start(FakeHost(telemetry))
    await exporter.shutdown()


async def test_tls_to_a_plaintext_receiver_says_once_what_to_write(
    server: tuple[Servicer, str], caplog: pytest.LogCaptureFixture
) -> None:
    """An endpoint without a scheme asks for TLS: a plaintext receiver fails every retry at
    the handshake, and the log says once what to change."""
    _, endpoint = server
    transport = GrpcTransport(OtlpExporterConfig.model_validate({"endpoint": endpoint}))
    await transport.open()
    try:
        with caplog.at_level(logging.WARNING, logger="otelgpu.exporters.otlp"):
            for _ in range(2):
                with pytest.raises(ExportError) as failed_call:
                    await transport.export(_request(), timeout=5)
                assert failed_call.value.retryable
    finally:
        await transport.close()
    hints = [r for r in caplog.records if "answers without TLS" in r.getMessage()]
    assert [(r.name, r.getMessage()) for r in hints] == [
        (
            "otelgpu.exporters.otlp",
            f"{endpoint} answers without TLS, and this endpoint asks for TLS (the default "
            f"without a scheme): use http://{endpoint} for a plaintext receiver (or "
            "tls::insecure: true)",
        )
    ]


@pytest.mark.parametrize(("size", "read"), [(64_900, True), (66_000, False)])
async def test_an_answer_is_read_up_to_64_kib(
    server: tuple[Servicer, str], size: int, read: bool
) -> None:
    """An OTLP receiver answers with a count and a text: a bigger answer is a peer to refuse."""
    servicer, endpoint = server
    text = "x" * size
    partial = ExportMetricsPartialSuccess(rejected_data_points=1, error_message=text)
    servicer.script = [ExportMetricsServiceResponse(partial_success=partial)]
    transport = await _transport(endpoint)
    try:
        if read:
            assert await transport.export(_request(), timeout=5) == ExportResponse(1, text)
        else:
            with pytest.raises(ExportError, match="RESOURCE_EXHAUSTED"):
                await transport.export(_request(), timeout=5)
    finally:
        await transport.close()


async def test_an_undecodable_answer_counts_the_request_as_delivered_and_says_so() -> None:
    """The request reached the receiver; only its answer cannot be read."""

    async def export(request: bytes, context: Any) -> bytes:
        return b"\xff\xff\xff"

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.metrics.v1.MetricsService",
        {"Export": grpc.unary_unary_rpc_method_handler(export)},
    )
    srv = grpc.aio.server()
    srv.add_generic_rpc_handlers((handler,))
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    transport = await _transport(f"127.0.0.1:{port}")
    try:
        response = await transport.export(_request(), timeout=5)
    finally:
        await transport.close()
        await srv.stop(grace=None)
    assert response.rejected == 0
    assert response.message.startswith("an undecodable ExportMetricsServiceResponse: ")


async def test_the_user_agent_names_the_agent_and_its_version(
    server: tuple[Servicer, str],
) -> None:
    servicer, endpoint = server
    transport = await _transport(endpoint)
    try:
        await transport.export(_request(), timeout=5)
    finally:
        await transport.close()
    assert servicer.metadata[-1]["user-agent"].startswith(f"otelgpu/{__version__} ")


async def test_gzip_is_what_goes_on_the_wire_when_asked_for(
    server: tuple[Servicer, str],
) -> None:
    servicer, endpoint = server
    request = encode_bytes(numbered_batch(1, 2000))  # a few hundred kB that gzip shrinks
    sent = {}
    for compression in ("gzip", "none"):
        relay = CountingRelay(int(endpoint.rpartition(":")[2]))
        async with relay as port:
            transport = await _transport(f"127.0.0.1:{port}", compression=compression)
            try:
                await transport.export(request, timeout=10)
            finally:
                await transport.close()
        sent[compression] = relay.sent
    assert sent["none"] > len(request) > 4 * sent["gzip"]
    assert [len(r.SerializeToString()) for r in servicer.requests] == [len(request)] * 2


async def test_closing_the_transport_closes_its_connection(server: tuple[Servicer, str]) -> None:
    _, endpoint = server
    relay = CountingRelay(int(endpoint.rpartition(":")[2]))
    async with relay as port:
        transport = await _transport(f"127.0.0.1:{port}")
        await transport.export(_request(), timeout=5)
        assert not relay.hung_up.is_set()
        await transport.close()
        await asyncio.wait_for(relay.hung_up.wait(), 10)


async def test_a_tls_receiver_out_of_reach_while_skipping_verification_is_retried() -> None:
    """Its certificate is read first (to trust it); a receiver that does not answer fails
    that read, named by the endpoint, and the retry loop tries again later."""
    config = OtlpExporterConfig.model_validate(
        {"endpoint": "127.0.0.1:1", "tls": {"insecure_skip_verify": True}}
    )
    transport = GrpcTransport(config)
    await transport.open()
    try:
        with pytest.raises(ExportError) as caught:
            await transport.export(_request(), timeout=5)
    finally:
        await transport.close()
    assert str(caught.value).startswith("TLS to 127.0.0.1:1: ")
    assert caught.value.retryable


async def test_skipping_verification_trusts_the_certificate_under_its_first_name() -> None:
    """The certificate names `gpu-gateway.example` (its common name is no host name): the
    channel checks it under that name, whatever address was dialled."""
    issued = issue("otelgpu test receiver", hosts=("gpu-gateway.example",))
    srv = grpc.aio.server()
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Servicer(), srv)
    credentials = grpc.ssl_server_credentials([(issued.key_pem, issued.cert_pem)])
    port = srv.add_secure_port("127.0.0.1:0", credentials)
    await srv.start()
    config = OtlpExporterConfig.model_validate(
        {"endpoint": f"127.0.0.1:{port}", "tls": {"insecure_skip_verify": True}}
    )
    transport = GrpcTransport(config)
    await transport.open()
    try:
        assert await transport.export(_request(), timeout=5) == ExportResponse()
    finally:
        await transport.close()
        await srv.stop(grace=None)


def test_retry_info_is_found_among_other_binary_trailers() -> None:
    details = _status_with_retry_info(Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_delay=1))
    trailers = (
        ("x-trace-bin", b"\x0a\xff"),
        ("x-note", "text"),
        ("grpc-status-details-bin", details),
    )
    assert retry_delay(trailers) == 1.5
