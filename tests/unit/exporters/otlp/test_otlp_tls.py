"""TLS on both transports: the CA file (or PEM) is used, an unknown certificate is refused,
the Collector's server_name_override and version range are honoured (the range grpcio cannot
enforce is named once, at load), and `insecure_skip_verify` reaches an IPv6 endpoint and a
server a configured CA signed."""

from __future__ import annotations

import asyncio
import logging
import ssl
import tempfile
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
from otelgpu.exporters.otlp.config import (
    ClientTLSConfig,
    OtlpExporterConfig,
    OtlpHttpExporterConfig,
)
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.grpc_client import GrpcTransport
from otelgpu.exporters.otlp.http_client import HttpTransport
from otelgpu.exporters.otlp.tls import (
    certificate_names,
    grpc_credentials,
    presented_certificate,
    ssl_context,
)
from tests.peers.certs import Issued, issue
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


@pytest.mark.parametrize("form", ["pem", "files", "pem and file"])
async def test_https_client_certificate_as_pem_or_files(
    tmp_path: Path, cert: tuple[Path, Path], form: str
) -> None:
    """Mutual TLS with cert_pem/key_pem, cert_file/key_file, or a PEM certificate with a key
    file: the server requires a client certificate."""
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
        (tmp_path / "client.pem").write_text(client_cert)
        (tmp_path / "client.key").write_text(client_key)
        tls |= {
            "pem": {"cert_pem": client_cert, "key_pem": client_key},
            "files": {
                "cert_file": str(tmp_path / "client.pem"),
                "key_file": str(tmp_path / "client.key"),
            },
            "pem and file": {"cert_pem": client_cert, "key_file": str(tmp_path / "client.key")},
        }[form]
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


@pytest.mark.parametrize(
    ("min_version", "max_version", "floor", "lowest", "highest"),
    [
        ("1.0", "", "1.0", ssl.TLSVersion.TLSv1, ssl.TLSVersion.MAXIMUM_SUPPORTED),
        ("1.1", "1.2", "1.0", ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_2),
        ("1.2", "", "1.0", ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.MAXIMUM_SUPPORTED),
        ("1.3", "1.3", "1.0", ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3),
        ("1.0", "", "1.2", ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.MAXIMUM_SUPPORTED),
    ],
)
@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_the_context_takes_the_version_range_never_below_the_floor(
    min_version: str,
    max_version: str,
    floor: str,
    lowest: ssl.TLSVersion,
    highest: ssl.TLSVersion,
) -> None:
    tls = ClientTLSConfig.model_validate({"min_version": min_version, "max_version": max_version})
    context = ssl_context(tls, floor=floor)
    assert (context.minimum_version, context.maximum_version) == (lowest, highest)


def test_grpc_takes_the_systems_roots_when_no_ca_is_set() -> None:
    """The same bundle `ssl` trusts, not grpcio's own copy of some roots."""
    paths = ssl.get_default_verify_paths()
    bundle = next(p for p in (paths.cafile, paths.openssl_cafile) if p and Path(p).is_file())
    assert grpc_credentials(ClientTLSConfig()).root_certificates == Path(bundle).read_bytes()


@pytest.mark.parametrize(
    ("cafile", "openssl_cafile", "used"),
    [
        (None, "bundle.pem", "bundle.pem"),  # no SSL_CERT_FILE: OpenSSL's own default
        ("missing.pem", "bundle.pem", "bundle.pem"),
        ("missing.pem", "also-missing.pem", None),  # grpcio's own roots then
    ],
)
def test_grpc_roots_come_from_the_first_bundle_that_exists(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cafile: str | None,
    openssl_cafile: str,
    used: str | None,
) -> None:
    (tmp_path / "bundle.pem").write_bytes(issue().cert_pem)
    paths = ssl.DefaultVerifyPaths(
        str(tmp_path / cafile) if cafile else None,
        None,
        "SSL_CERT_FILE",
        str(tmp_path / openssl_cafile),
        "SSL_CERT_DIR",
        str(tmp_path),
    )
    monkeypatch.setattr(ssl, "get_default_verify_paths", lambda: paths)
    roots = grpc_credentials(ClientTLSConfig()).root_certificates
    assert roots == ((tmp_path / used).read_bytes() if used else None)


class _Handshakes:
    """A TLS server that notes what each client offered: the server name (SNI) and whether
    it asked for HTTP/2 by ALPN, as gRPC servers require."""

    def __init__(self, issued: Issued) -> None:
        self.names: list[str | None] = []
        self.protocols: list[str | None] = []
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as directory:
            cert, key = Path(directory, "c.pem"), Path(directory, "k.pem")
            cert.write_bytes(issued.cert_pem)
            key.write_bytes(issued.key_pem)
            self.context.load_cert_chain(cert, key)
        self.context.set_alpn_protocols(["h2"])
        self.context.sni_callback = lambda sock, name, ctx: self.names.append(name)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        self.protocols.append(ssl_object.selected_alpn_protocol())
        writer.close()


@pytest.fixture
async def handshakes() -> AsyncIterator[tuple[_Handshakes, int, Issued]]:
    issued = issue()
    seen = _Handshakes(issued)
    server = await asyncio.start_server(seen.serve, "127.0.0.1", 0, ssl=seen.context)
    async with server:
        yield seen, server.sockets[0].getsockname()[1], issued


async def test_a_certificate_is_read_with_http2_offered_and_the_name_asked_for(
    handshakes: tuple[_Handshakes, int, Issued],
) -> None:
    seen, port, issued = handshakes
    pem = await presented_certificate("127.0.0.1", port, "", timeout=5)
    assert ssl.PEM_cert_to_DER_cert(pem.decode()) == ssl.PEM_cert_to_DER_cert(
        issued.cert_pem.decode()
    )
    await presented_certificate("127.0.0.1", port, "gpu-gateway.example", timeout=5)
    assert seen.protocols == ["h2", "h2"]
    assert seen.names == [None, "gpu-gateway.example"]  # no SNI for an address


async def test_the_names_of_a_self_signed_certificate_are_its_dns_ip_and_common_names(
    handshakes: tuple[_Handshakes, int, Issued],
) -> None:
    _, port, issued = handshakes
    names = await certificate_names("127.0.0.1", port, issued.cert_pem, "", timeout=5)
    assert names == ["localhost", "127.0.0.1", "localhost"]
    other = issue().cert_pem  # not what the server presents: the handshake fails
    assert await certificate_names("127.0.0.1", port, other, "", timeout=5) == []
