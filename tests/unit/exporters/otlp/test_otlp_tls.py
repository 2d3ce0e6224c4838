"""TLS on both transports: the CA file (or PEM) is used, an unknown certificate is refused,
the Collector's server_name_override and version range are honoured (the range grpcio cannot
enforce is named once, at load), and `insecure_skip_verify` reaches an IPv6 endpoint and a
server a configured CA signed."""

from __future__ import annotations

import logging
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

from otelgpu.component.errors import ExportError
from otelgpu.exporters.otlp.config import OtlpExporterConfig, OtlpHttpExporterConfig
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.grpc_client import GrpcTransport
from otelgpu.exporters.otlp.http_client import HttpTransport
from tests.peers.certs import issue
from tests.peers.prometheus import self_signed_cert
from tests.unit.exporters.otlp.batches import export_once


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


async def test_grpc_verifies_the_server_with_the_ca_file(
    grpc_tls: int, cert: tuple[Path, Path]
) -> None:
    trusted = OtlpExporterConfig.model_validate(
        {"endpoint": f"localhost:{grpc_tls}", "tls": {"ca_file": str(cert[0])}}
    )
    assert await export_once(GrpcTransport(trusted)) == ExportResponse()
    untrusted = OtlpExporterConfig(endpoint=f"localhost:{grpc_tls}")  # system roots only
    with pytest.raises(ExportError, match="UNAVAILABLE"):
        await export_once(GrpcTransport(untrusted))


async def test_https_verifies_the_server_unless_told_not_to(
    https: int, cert: tuple[Path, Path]
) -> None:
    url = f"https://localhost:{https}"
    trusted = OtlpHttpExporterConfig.model_validate(
        {"endpoint": url, "tls": {"ca_file": str(cert[0])}}
    )
    assert await export_once(HttpTransport(trusted)) == ExportResponse()
    with pytest.raises(ExportError, match="certificate"):
        await export_once(HttpTransport(OtlpHttpExporterConfig(endpoint=url)))
    skip = OtlpHttpExporterConfig.model_validate(
        {"endpoint": url, "tls": {"insecure_skip_verify": True}}
    )
    assert await export_once(HttpTransport(skip)) == ExportResponse()


async def test_grpc_takes_the_ca_as_pem_and_checks_the_overridden_name(
    grpc_tls: int, cert: tuple[Path, Path]
) -> None:
    pem = cert[0].read_text()

    def config(name: str) -> OtlpExporterConfig:
        tls = {"ca_pem": pem, "server_name_override": name}
        return OtlpExporterConfig.model_validate({"endpoint": f"127.0.0.1:{grpc_tls}", "tls": tls})

    assert await export_once(GrpcTransport(config("localhost"))) == ExportResponse()
    with pytest.raises(ExportError, match="UNAVAILABLE"):  # the certificate is not for this name
        await export_once(GrpcTransport(config("wrong.example")))


async def test_https_takes_pem_text_min_version_and_the_overridden_name(
    https: int, cert: tuple[Path, Path]
) -> None:
    def config(name: str) -> OtlpHttpExporterConfig:
        tls = {"ca_pem": cert[0].read_text(), "server_name_override": name, "min_version": "1.3"}
        return OtlpHttpExporterConfig.model_validate(
            {"endpoint": f"https://127.0.0.1:{https}", "tls": tls}
        )

    assert await export_once(HttpTransport(config("localhost"))) == ExportResponse()
    with pytest.raises(ExportError, match="certificate"):
        await export_once(HttpTransport(config("wrong.example")))


@pytest.fixture
async def https_versions(tmp_path: Path) -> AsyncIterator[tuple[str, list[str]]]:
    """An https endpoint (TLS 1.2 or 1.3) that records the TLS version of each request."""
    cert_file, key_file = self_signed_cert(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    versions: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        assert request.transport is not None
        versions.append(request.transport.get_extra_info("ssl_object").version())
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/v1/metrics", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    yield f"https://localhost:{runner.addresses[0][1]}", versions
    await runner.cleanup()


async def test_https_max_version_caps_the_negotiated_tls_version(
    https_versions: tuple[str, list[str]],
) -> None:
    url, versions = https_versions
    for tls in ({}, {"max_version": "1.2"}):
        config = OtlpHttpExporterConfig.model_validate(
            {"endpoint": url, "tls": {"insecure_skip_verify": True, **tls}}
        )
        assert await export_once(HttpTransport(config)) == ExportResponse()
    assert versions == ["TLSv1.3", "TLSv1.2"]


async def test_https_client_certificate_as_pem(tmp_path: Path, cert: tuple[Path, Path]) -> None:
    """Mutual TLS with cert_pem/key_pem: the server requires a client certificate."""
    cert_file, key_file = cert
    client_cert, client_key = _client_cert()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=client_cert)
    context.load_cert_chain(cert_file, key_file)
    context.verify_mode = ssl.CERT_REQUIRED
    app = web.Application()
    app.router.add_post("/v1/metrics", _ok)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    try:
        url = f"https://localhost:{runner.addresses[0][1]}"
        tls = {"ca_file": str(cert_file)}
        with pytest.raises(ExportError):
            await export_once(HttpTransport(OtlpHttpExporterConfig(endpoint=url, tls=tls)))  # type: ignore[arg-type]
        tls |= {"cert_pem": client_cert, "key_pem": client_key}
        mutual = OtlpHttpExporterConfig.model_validate({"endpoint": url, "tls": tls})
        assert await export_once(HttpTransport(mutual)) == ExportResponse()
    finally:
        await runner.cleanup()


def _client_cert() -> tuple[str, str]:
    """A self-signed client certificate (its own CA) and its key, as PEM text."""
    issued = issue("otelgpu-client", client=True)
    return issued.cert_pem.decode(), issued.key_pem.decode()


async def _secure_grpc_server(
    address: str, key_and_cert: tuple[bytes, bytes]
) -> tuple[grpc.aio.Server, int]:
    """A MetricsService that accepts every request, over TLS with this key and certificate."""
    server = grpc.aio.server()
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Accept(), server)
    port = server.add_secure_port(address, grpc.ssl_server_credentials([key_and_cert]))
    await server.start()
    return server, port


@pytest.mark.parametrize(
    ("tls", "line"),
    [
        ({"min_version": "1.3"}, "tls::min_version 1.3 / max_version (none) cannot be enforced"),
        ({"max_version": "1.2"}, "tls::min_version 1.2 / max_version 1.2 cannot be enforced"),
    ],
)
async def test_grpc_names_a_version_range_it_cannot_enforce_once_at_load(
    tls: dict[str, str], line: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = OtlpExporterConfig.model_validate({"endpoint": "gw.example:4317", "tls": tls})
    ((path, message),) = config.config_warnings()
    assert path == ("tls", next(iter(tls)))
    assert message == f"{line} on gRPC: grpcio negotiates TLS 1.2 or 1.3 with the server"
    transport = GrpcTransport(config)  # the load warned (positioned): starting says nothing
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        await transport.open()
    await transport.close()
    assert [r.getMessage() for r in caplog.records] == []


async def test_grpc_skips_verification_for_an_ipv6_endpoint(tmp_path: Path) -> None:
    cert_file, key_file = self_signed_cert(tmp_path)
    key_and_cert = (key_file.read_bytes(), cert_file.read_bytes())
    server, port = await _secure_grpc_server("[::1]:0", key_and_cert)
    try:
        config = OtlpExporterConfig.model_validate(
            {"endpoint": f"[::1]:{port}", "tls": {"insecure_skip_verify": True}}
        )
        assert await export_once(GrpcTransport(config)) == ExportResponse()
    finally:
        await server.stop(grace=None)


async def test_grpc_skipping_verification_still_reaches_a_server_a_configured_ca_signed() -> None:
    ca_pem, key_pem, cert_pem = _ca_and_server_cert()
    server, port = await _secure_grpc_server("127.0.0.1:0", (key_pem, cert_pem))
    try:
        config = OtlpExporterConfig.model_validate(
            {
                "endpoint": f"localhost:{port}",
                "tls": {"ca_pem": ca_pem.decode(), "insecure_skip_verify": True},
            }
        )
        assert await export_once(GrpcTransport(config)) == ExportResponse()
    finally:
        await server.stop(grace=None)


def _ca_and_server_cert() -> tuple[bytes, bytes, bytes]:
    """A CA's certificate, and a server key and certificate (for `localhost`) it signed, as PEM."""
    ca = issue("otelgpu test CA", ca=True)
    server = issue(signer=ca)
    return ca.cert_pem, server.key_pem, server.cert_pem


async def test_grpc_skips_verification_when_told_and_takes_any_version_range(
    grpc_tls: int, cert: tuple[Path, Path]
) -> None:
    def config(tls: dict[str, object]) -> OtlpExporterConfig:
        return OtlpExporterConfig.model_validate({"endpoint": f"localhost:{grpc_tls}", "tls": tls})

    assert (
        await export_once(GrpcTransport(config({"insecure_skip_verify": True}))) == ExportResponse()
    )
    trusted = str(cert[0])
    for versions in ({"min_version": "1.3"}, {"max_version": "1.2"}, {"min_version": "1.0"}):
        transport = GrpcTransport(config({"ca_file": trusted, **versions}))
        assert await export_once(transport) == ExportResponse(), versions
