"""Basic auth (bcrypt, constant time, cache) and TLS on `/metrics`."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from otelgpu.component.component import Kind
from otelgpu.exporters.prometheus import auth
from otelgpu.exporters.prometheus.auth import BasicAuthenticator, server_ssl_context
from otelgpu.exporters.prometheus.config import (
    PrometheusExporterConfig,
    TLSServerConfig,
)
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from tests.fakes import FakeHost
from tests.peers.prometheus import self_signed_cert
from tests.unit.exporters.prometheus.scrape_auth import HASH, PASSWORD, basic, prepared_checker
from tests.unit.exporters.prometheus.translators import nvml_settings


@pytest.fixture
async def authenticator() -> AsyncIterator[BasicAuthenticator]:
    a = await prepared_checker()
    yield a
    a.close()
    a.close()  # idempotent


@pytest.fixture
def bcrypt_calls(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    calls: list[bytes] = []
    real = auth._checkpw

    def counting(password: bytes, hashed: bytes) -> bool:
        calls.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(auth, "_checkpw", counting)
    return calls


async def test_right_password_passes_and_is_cached(
    authenticator: BasicAuthenticator, bcrypt_calls: list[bytes]
) -> None:
    assert await authenticator.check(basic("prom", PASSWORD))
    assert await authenticator.check(basic("prom", PASSWORD))
    assert len(bcrypt_calls) == 1  # the second check hit the cache
    # The cache holds keyed digests, never the password.
    assert all(PASSWORD.encode() not in key for key in authenticator._ok)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        basic("prom", "wrong"),
        basic("nobody", PASSWORD),
        "Basic !!!",
        "Bearer abc",
        basic("prom", ""),
    ],
)
async def test_everything_else_fails_after_a_bcrypt_check(
    authenticator: BasicAuthenticator, bcrypt_calls: list[bytes], header: str | None
) -> None:
    assert not await authenticator.check(header)
    # bcrypt ran even for an unknown user or a malformed header: same time as a wrong password,
    # against a hash of the same cost.
    assert len(bcrypt_calls) == 1
    assert bcrypt_calls[0].split(b"$")[2] == HASH.encode().split(b"$")[2]


async def test_a_crafted_username_cannot_reuse_a_cached_success(
    authenticator: BasicAuthenticator,
) -> None:
    assert await authenticator.check(basic("prom", PASSWORD))
    # CVE-2022-46146 shape: shifting bytes between user and password must not hit the cache.
    assert not await authenticator.check(basic("proms3cret", "-scrape"))
    assert not await authenticator.check(basic("prom", PASSWORD + "x"))


@pytest.fixture
def cert(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed_cert(tmp_path)


@pytest.fixture
async def secured(host: FakeHost, cert: tuple[Path, Path]) -> AsyncIterator[PrometheusExporter]:
    config = PrometheusExporterConfig.model_validate(
        {
            "endpoint": "127.0.0.1:0",
            "tls": {"cert_file": str(cert[0]), "key_file": str(cert[1])},
            "basic_auth": {"username": "prom", "password_hash": HASH},
        }
    )
    exp = PrometheusExporter(nvml_settings("prometheus", Kind.EXPORTER, host.telemetry), config)
    await exp.start(host)
    yield exp
    await exp.shutdown()


def client_context(cafile: Path, maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cafile))
    if maximum is not None:
        context.maximum_version = maximum
    return context


async def get(exp: PrometheusExporter, context: ssl.SSLContext, header: str | None) -> int:
    headers = {"Authorization": header} if header else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"https://localhost:{exp.port}/metrics", ssl=context, headers=headers) as r,
    ):
        await r.read()
        return r.status


async def test_https_with_basic_auth(secured: PrometheusExporter, cert: tuple[Path, Path]) -> None:
    context = client_context(cert[0])
    assert await get(secured, context, basic("prom", PASSWORD)) == 200
    assert await get(secured, context, basic("prom", "nope")) == 401
    assert await get(secured, context, None) == 401
    assert (
        await get(secured, client_context(cert[0], ssl.TLSVersion.TLSv1_2), basic("prom", PASSWORD))
        == 200
    )
    await secured.refresh()
    body = secured.body.plain
    assert (
        b'otelgpu_prometheus_scrapes_total{code="401",exporter="prometheus",format="text"} 2'
        in body
    )
    assert PASSWORD.encode() not in body


async def test_plain_http_is_refused_by_a_tls_endpoint(secured: PrometheusExporter) -> None:
    with pytest.raises(aiohttp.ClientError):
        async with aiohttp.ClientSession() as session:
            await session.get(f"http://127.0.0.1:{secured.port}/metrics")


def test_server_context_never_below_tls_1_2(cert: tuple[Path, Path]) -> None:
    default = server_ssl_context(TLSServerConfig(cert_file=str(cert[0]), key_file=str(cert[1])))
    strict = server_ssl_context(
        TLSServerConfig(cert_file=str(cert[0]), key_file=str(cert[1]), min_version="1.3")
    )
    mutual = server_ssl_context(
        TLSServerConfig(cert_file=str(cert[0]), key_file=str(cert[1]), client_ca_file=str(cert[0]))
    )
    assert default.minimum_version is ssl.TLSVersion.TLSv1_2
    assert strict.minimum_version is ssl.TLSVersion.TLSv1_3
    assert mutual.verify_mode is ssl.CERT_REQUIRED


async def test_min_version_1_3_refuses_a_tls_1_2_client(
    host: FakeHost, cert: tuple[Path, Path]
) -> None:
    config = PrometheusExporterConfig.model_validate(
        {
            "endpoint": "127.0.0.1:0",
            "tls": {"cert_file": str(cert[0]), "key_file": str(cert[1]), "min_version": "1.3"},
        }
    )
    exp = PrometheusExporter(nvml_settings("prometheus", Kind.EXPORTER, host.telemetry), config)
    await exp.start(host)
    try:
        assert await get(exp, client_context(cert[0]), None) == 200
        with pytest.raises(aiohttp.ClientError):
            await get(exp, client_context(cert[0], ssl.TLSVersion.TLSv1_2), None)
    finally:
        await exp.shutdown()


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Basic " + base64.b64encode(b"prom:pw").decode(), (b"prom", b"pw")),
        ("basic " + base64.b64encode(b"prom:a:b").decode(), (b"prom", b"a:b")),  # ':' in password
        (
            "Basic " + base64.b64encode("jörg:pä".encode()).decode(),
            ("jörg".encode(), "pä".encode()),
        ),
        ("Basic " + base64.b64encode(b"no-colon").decode(), (b"", b"")),
        ("Basic not*base64", (b"", b"")),
        ("Basic " + base64.b64encode(b"\xff\xfe:x").decode(), (b"", b"")),  # not UTF-8
        ("Bearer abc", (b"", b"")),
        ("", (b"", b"")),
        (None, (b"", b"")),
    ],
)
def test_basic_header_parsing(header: str | None, expected: tuple[bytes, bytes]) -> None:
    # aiohttp's decoder was replaced (the endpoint no longer imports aiohttp): same answers.
    assert auth._parse(header) == expected
