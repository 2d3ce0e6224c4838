"""`otlp_http` through an HTTP proxy: `proxy_url`, or HTTP(S)_PROXY / NO_PROXY as Go's
net/http (and so the Collector) reads them.

The proxy is a real one, small: it tunnels CONNECT and forwards absolute-form requests, and
sends everything to the local OTLP/HTTP receiver whatever host the client named. So an
endpoint whose name resolves nowhere (`otlp.example`) is reached only through the proxy.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config import load_config
from otelgpu.config.render import render
from otelgpu.exporters.otlp import http_factory
from otelgpu.exporters.otlp.config import OtlpHttpExporterConfig
from otelgpu.exporters.otlp.encode import encode_bytes
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.http_client import HttpTransport, proxy_for
from otelgpu.service.builtins import builtin_registry
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.peers.prometheus import self_signed_cert
from tests.unit.exporters.otlp.batches import failed, numbered_batch, sent

NOWHERE = "otlp.example"  # resolves nowhere (RFC 2606): reached only through the proxy


class Receiver:
    """An OTLP/HTTP receiver: records each request's Host header and points."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.points = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = ExportMetricsServiceRequest.FromString(await request.read())
        self.hosts.append(request.headers["Host"])
        self.headers.append(dict(request.headers))
        self.points += sum(
            len(m.gauge.data_points)
            for rm in body.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        )
        return web.Response(status=200)


async def _serve(receiver: Receiver, ssl_context: ssl.SSLContext | None = None) -> web.AppRunner:
    app = web.Application()
    app.router.add_post("/v1/metrics", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context).start()
    return runner


class Proxy:
    """A forward proxy on loopback that sends every request and tunnel to `upstream`."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.forwarded: list[str] = []  # absolute-form request targets passed on
        self.tunnels: list[str] = []  # CONNECT authorities
        self.credentials: list[str | None] = []  # Proxy-Authorization, per request or tunnel
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            while head := await _head(reader):
                method, target, version, headers = head
                self.credentials.append(headers.pop("proxy-authorization", None))
                if upstream is None:
                    up_reader, upstream = await asyncio.open_connection("127.0.0.1", self.upstream)
                    self._pipe(up_reader, writer)  # answers go back as they come
                if method == "CONNECT":
                    self.tunnels.append(target)
                    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    self._pipe(reader, upstream)
                    return
                self.forwarded.append(target)
                url = urlsplit(target)
                lines = [f"{method} {url.path or '/'} {version}"]
                lines += [f"{k}: {v}" for k, v in headers.items() if k != "proxy-connection"]
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                upstream.write("\r\n".join(lines).encode() + b"\r\n\r\n" + body)
        finally:
            if upstream is not None and not self._tasks:
                upstream.close()

    def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        async def pipe() -> None:
            with contextlib.suppress(ConnectionError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        task = asyncio.create_task(pipe())
        self._tasks.add(task)


async def _head(reader: asyncio.StreamReader) -> tuple[str, str, str, dict[str, str]] | None:
    """A request head: (method, target, version, headers by lower-case name); None at EOF."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    first, *rest = raw.decode("latin-1").split("\r\n")
    method, target, version = first.split(" ")
    headers = {}
    for line in rest:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return method, target, version, headers


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, int]]:
    rec = Receiver()
    runner = await _serve(rec)
    yield rec, runner.addresses[0][1]
    await runner.cleanup()


@pytest.fixture
async def proxy(receiver: tuple[Receiver, int]) -> AsyncIterator[Proxy]:
    peer = Proxy(receiver[1])
    await peer.start()
    yield peer
    await peer.close()


async def _send(
    endpoint: str, *, times: int = 1, environ: dict[str, str] | None = None, **options: Any
) -> list[ExportResponse]:
    config = OtlpHttpExporterConfig.model_validate({"endpoint": endpoint, **options})
    transport = HttpTransport(config, environ=environ or {})
    await transport.open()
    try:
        return [
            await transport.export(encode_bytes(numbered_batch(n, 2)), timeout=5)
            for n in range(times)
        ]
    finally:
        await transport.close()


async def test_proxy_url_carries_every_request(
    receiver: tuple[Receiver, int], proxy: Proxy
) -> None:
    rec, port = receiver
    # Set explicitly, it is used for any endpoint, loopback included, whatever the environment.
    environ = {"NO_PROXY": "*"}
    answers = await _send(f"http://127.0.0.1:{port}", times=3, environ=environ, proxy_url=proxy.url)
    assert answers == [ExportResponse()] * 3
    assert proxy.forwarded == [f"http://127.0.0.1:{port}/v1/metrics"] * 3
    assert (len(rec.hosts), rec.points) == (3, 6)


async def test_proxy_url_credentials_go_to_the_proxy_only(
    receiver: tuple[Receiver, int], proxy: Proxy
) -> None:
    rec, _ = receiver
    with_user = proxy.url.replace("http://", "http://bob:p%40ss@")
    await _send(f"http://{NOWHERE}:4318", proxy_url=with_user)
    assert proxy.credentials == ["Basic " + base64.b64encode(b"bob:p@ss").decode()]
    assert rec.hosts == [f"{NOWHERE}:4318"]
    assert not any(k.lower() == "proxy-authorization" for k in rec.headers[0])


async def test_http_proxy_from_the_environment(
    receiver: tuple[Receiver, int], proxy: Proxy
) -> None:
    rec, _ = receiver
    environ = {"HTTP_PROXY": proxy.url, "NO_PROXY": "gateway.internal,10.0.0.0/8"}
    assert await _send(f"http://{NOWHERE}:4318", times=2, environ=environ) == [ExportResponse()] * 2
    assert proxy.forwarded == [f"http://{NOWHERE}:4318/v1/metrics"] * 2
    assert rec.hosts == [f"{NOWHERE}:4318"] * 2


async def test_https_proxy_from_the_environment_tunnels_with_connect(
    tmp_path: Path,
) -> None:
    cert_file, key_file = self_signed_cert(tmp_path)  # for `localhost`
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    rec = Receiver()
    runner = await _serve(rec, context)
    peer = Proxy(runner.addresses[0][1])
    await peer.start()
    try:
        # lower case, without a scheme: as Go reads it
        environ = {"https_proxy": peer.url.removeprefix("http://"), "HTTP_PROXY": "http://x:1"}
        tls = {"ca_file": str(cert_file), "server_name_override": "localhost"}
        assert await _send(f"https://{NOWHERE}", environ=environ, tls=tls) == [ExportResponse()]
    finally:
        await peer.close()
        await runner.cleanup()
    assert peer.tunnels == [f"{NOWHERE}:443"] and peer.forwarded == []
    assert rec.hosts == [NOWHERE]


@pytest.mark.parametrize("no_proxy", ["", f"{NOWHERE}", "*"], ids=["loopback", "named", "star"])
async def test_loopback_and_no_proxy_hosts_are_reached_directly(
    receiver: tuple[Receiver, int], proxy: Proxy, no_proxy: str
) -> None:
    rec, port = receiver
    environ = {"HTTP_PROXY": proxy.url, "NO_PROXY": no_proxy}
    assert await _send(f"http://127.0.0.1:{port}", environ=environ) == [ExportResponse()]
    assert proxy.forwarded == [] and rec.hosts == [f"127.0.0.1:{port}"]


async def test_the_exporter_reads_the_process_environment(
    receiver: tuple[Receiver, int],
    proxy: Proxy,
    telemetry: SelfTelemetry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rec, _ = receiver
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    config = http_factory.config_type.model_validate({"endpoint": f"http://{NOWHERE}:4318"})
    exporter = http_factory.create(make_settings("otlp_http", Kind.EXPORTER, telemetry), config)
    await exporter.start(FakeHost(telemetry))
    await exporter.consume(numbered_batch(1, 5))  # handed to the consumer at once
    await exporter.shutdown()  # waits for the send in flight
    assert (sent(telemetry, "otlp_http"), failed(telemetry, "otlp_http")) == (5, 0)
    assert len(proxy.forwarded) == 1 and rec.points == 5


URL = f"http://{NOWHERE}:4318/v1/metrics"
SECURE = f"https://{NOWHERE}/v1/metrics"


@pytest.mark.parametrize(
    ("url", "environ", "proxy"),
    [
        (URL, {}, ""),
        (URL, {"HTTP_PROXY": "http://p:3128"}, "http://p:3128"),
        (URL, {"http_proxy": "p:3128"}, "http://p:3128"),
        (URL, {"HTTP_PROXY": "http://a:1", "http_proxy": "http://b:1"}, "http://a:1"),
        (URL, {"HTTPS_PROXY": "http://p:3128"}, ""),  # for https URLs only
        (SECURE, {"HTTP_PROXY": "http://p:3128"}, ""),
        (SECURE, {"HTTPS_PROXY": "https://p:3129"}, "https://p:3129"),
        ("http://localhost:4318", {"HTTP_PROXY": "http://p:1"}, ""),
        ("http://127.0.0.9:4318", {"HTTP_PROXY": "http://p:1"}, ""),
        ("http://[::1]:4318", {"HTTP_PROXY": "http://p:1"}, ""),
        ("http://10.1.2.3:4318", {"HTTP_PROXY": "http://p:1"}, "http://p:1"),
        ("http://10.1.2.3:4318", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, ""),
        ("http://10.1.2.3:4318", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "10.1.2.3"}, ""),
        ("http://[fd00::5]:80", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "[fd00::5]:80"}, ""),
        ("http://[fd00::5]:80", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "fd00::/8"}, ""),
        (URL, {"HTTP_PROXY": "http://p:1", "NO_PROXY": "example"}, ""),  # and subdomains
        (URL, {"HTTP_PROXY": "http://p:1", "NO_PROXY": " other.org , .EXAMPLE "}, ""),
        (URL, {"HTTP_PROXY": "http://p:1", "NO_PROXY": "*.example"}, ""),
        (URL, {"HTTP_PROXY": "http://p:1", "NO_PROXY": "otlp.example:4318"}, ""),
        (URL, {"HTTP_PROXY": "http://p:1", "NO_PROXY": "otlp.example:80"}, "http://p:1"),
        (URL, {"HTTP_PROXY": "http://p:1", "NO_PROXY": ".otlp.example"}, "http://p:1"),
        (URL, {"HTTP_PROXY": "http://p:1", "NO_PROXY": "tlp.example"}, "http://p:1"),
        (URL, {"HTTP_PROXY": "http://p:1", "no_proxy": "*"}, ""),
        # a URL without a port is on its scheme's: 443 for https, 80 for http
        ("https://otlp.example", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "otlp.example:443"}, ""),
        ("http://otlp.example", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "otlp.example:80"}, ""),
    ],
)
def test_the_environment_is_read_as_go_reads_it(
    url: str, environ: dict[str, str], proxy: str
) -> None:
    assert proxy_for(url, environ) == proxy


@pytest.mark.parametrize(
    ("proxy_url", "error"),
    [
        ("socks5://p:1080", "expected an http:// or https:// URL"),
        ("p:3128", "expected an http:// or https:// URL"),
        ("http://bob:hunter2@", "expected an http:// or https:// URL"),
        ("bob:hunter2@proxy.corp:3128", "expected an http:// or https:// URL"),
    ],
)
def test_a_bad_proxy_url_is_refused_without_its_password(proxy_url: str, error: str) -> None:
    with pytest.raises(ValueError, match=error) as caught:
        OtlpHttpExporterConfig.model_validate({"proxy_url": proxy_url})
    assert "hunter2" not in caught.value.errors()[0]["msg"]  # type: ignore[attr-defined]


def test_the_config_loader_takes_proxy_url_and_print_config_hides_its_password(
    tmp_path: Path,
) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        "receivers: {nvml: {backend: simulated}}\n"
        "exporters:\n"
        "  otlp_http:\n"
        "    endpoint: https://otlp.example.com\n"
        "    proxy_url: http://bob:hunter2@proxy.corp:3128\n"
        "service: {pipelines: {metrics: {receivers: [nvml], exporters: [otlp_http]}}}\n"
    )
    config = load_config([str(pipeline)], builtin_registry())
    printed = render(config)
    assert "proxy_url: http://bob:[REDACTED]@proxy.corp:3128" in printed
    assert "hunter2" not in printed
