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
from otelgpu.exporters.prometheus.server import MetricsServer
from tests.fakes import FakeHost
from tests.peers.prometheus import self_signed_cert
from tests.unit.exporters.prometheus.scrape_auth import (
    BODY,
    HASH,
    PASSWORD,
    basic,
    prepared_checker,
)
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


REMEMBERED = 256  # distinct (user, password) pairs that passed, remembered at most


async def test_the_pairs_remembered_are_forgotten_once_more_than_256_have_passed(
    authenticator: BasicAuthenticator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bcrypt is replaced by one that accepts every password (for the right user), so that
    many distinct pairs can pass; the 257th to pass empties the memory, and an earlier pair
    is checked by bcrypt again."""
    checked: list[bytes] = []

    def accepting(password: bytes, hashed: bytes) -> bool:
        checked.append(password)
        return True

    monkeypatch.setattr(auth, "_checkpw", accepting)
    headers = [basic("prom", f"password-{i}") for i in range(REMEMBERED + 1)]
    for header in headers[:REMEMBERED]:
        assert await authenticator.check(header, peer="127.0.0.2")
    assert all(authenticator.remembers(header) for header in headers[:REMEMBERED])
    assert await authenticator.check(headers[0], peer="127.0.0.2")
    assert len(checked) == REMEMBERED  # still remembered: no check

    assert await authenticator.check(headers[REMEMBERED], peer="127.0.0.2")
    assert authenticator.remembers(headers[REMEMBERED])
    assert not authenticator.remembers(headers[0])
    assert await authenticator.check(headers[0], peer="127.0.0.2")
    assert checked[-1] == b"password-0"  # checked again
    assert len(checked) == REMEMBERED + 2


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


@pytest.fixture
async def server(
    authenticator: BasicAuthenticator,
) -> AsyncIterator[tuple[MetricsServer, list[int]]]:
    answered: list[int] = []
    metrics = MetricsServer(
        host="127.0.0.1",
        port=0,
        current=lambda: BODY,
        on_scrape=lambda status, _: answered.append(status),
        authenticator=authenticator,
    )
    await metrics.start()
    yield metrics, answered
    await metrics.stop()


@pytest.mark.parametrize("junk", ["!", ".", "*", " "])
async def test_a_header_with_characters_outside_base64_is_refused_for_a_remembered_pair(
    server: tuple[MetricsServer, list[int]], junk: str
) -> None:
    """Like Go's decoder (exporter-toolkit), a character outside the base64 alphabet makes
    the header malformed: it is not skipped to read the right credentials from the rest."""
    metrics, answered = server
    url = f"http://127.0.0.1:{metrics.port}/metrics"
    right = basic("prom", PASSWORD)
    scheme, encoded = right.split(" ")
    spoiled = f"{scheme} {encoded[:4]}{junk}{encoded[4:]}"
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers={"Authorization": right}) as response:
            assert response.status == 200
        async with session.get(url, headers={"Authorization": spoiled}) as response:
            assert response.status == 401
            assert response.headers["WWW-Authenticate"].startswith("Basic ")
    assert answered == [200, 401]


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
