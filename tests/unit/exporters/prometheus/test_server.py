"""`/metrics` answers at their edges: a classic text 0.0.4 range preferred over OpenMetrics,
the refusal sent while the password checker is closed, and that the server closes the
checkers it owns (on stop, and on a reload replacing one)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from otelgpu.exporters.prometheus.auth import AuthBusy, BasicAuthenticator
from otelgpu.exporters.prometheus.server import MetricsServer
from tests.unit.exporters.prometheus.scrape_auth import (
    BODY,
    PASSWORD,
    basic,
    prepared_checker,
)

PLAIN = {"Accept-Encoding": "identity"}


def serving(authenticator: BasicAuthenticator | None = None) -> MetricsServer:
    """A server of `BODY` on a free port, checking passwords with `authenticator` if given."""
    return MetricsServer(
        host="127.0.0.1",
        port=0,
        current=lambda: BODY,
        on_scrape=lambda *_: None,
        authenticator=authenticator,
    )


async def scrape(port: int, headers: dict[str, str]) -> tuple[int, str, bytes, str]:
    """(status, Content-Type, body, Retry-After) of one GET /metrics."""
    async with aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{port}/metrics"
        async with session.get(url, headers={**PLAIN, **headers}) as response:
            return (
                response.status,
                response.headers.get("Content-Type", ""),
                await response.read(),
                response.headers.get("Retry-After", ""),
            )


@pytest.fixture
async def open_server() -> AsyncIterator[MetricsServer]:
    server = serving()
    await server.start()
    yield server
    await server.stop()


async def test_text_version_0_0_4_listed_above_openmetrics_gets_classic_text(
    open_server: MetricsServer,
) -> None:
    accept = "text/plain;version=0.0.4,application/openmetrics-text;version=1.0.0;q=0.5"
    status, content_type, body, _ = await scrape(open_server.port, {"Accept": accept})
    assert (status, content_type, body) == (
        200,
        "text/plain; version=0.0.4; charset=utf-8",
        b"up 1\n",
    )


async def test_a_scrape_while_the_password_checker_is_closed_is_refused_with_one_line() -> None:
    authenticator = await prepared_checker()
    server = serving(authenticator)
    await server.start()
    try:
        await asyncio.to_thread(authenticator.close)  # as a reload does to the one it replaces
        status, content_type, body, retry = await scrape(
            server.port, {"Authorization": basic("prom", PASSWORD)}
        )
        assert (status, body, retry) == (503, b"authentication is being reconfigured\n", "1")
        assert content_type == "text/plain; charset=utf-8"
    finally:
        await server.stop()


async def _refuses_checks(authenticator: BasicAuthenticator) -> bool:
    """Whether a closed checker is what answers a password it has not seen pass."""
    try:
        await authenticator.check(basic("prom", "never-passed"), peer="127.0.0.2")
    except AuthBusy as busy:
        return busy.status == 503
    return False


async def test_stopping_the_server_closes_its_password_checker() -> None:
    authenticator = await prepared_checker()
    server = serving(authenticator)
    await server.start()
    await server.stop()
    try:
        assert await _refuses_checks(authenticator)
    finally:
        authenticator.close()


async def test_a_reload_closes_the_password_checker_it_replaces_and_scrapes_use_the_new_one() -> (
    None
):
    replaced, renewed = await prepared_checker(), await prepared_checker()
    server = serving(replaced)
    await server.start()
    try:
        await server.serve(lambda: BODY, lambda *_: None, renewed)
        assert await _refuses_checks(replaced)
        status, _, body, _ = await scrape(server.port, {"Authorization": basic("prom", PASSWORD)})
        assert (status, body) == (200, b"up 1\n")
    finally:
        await server.stop()
        replaced.close()
