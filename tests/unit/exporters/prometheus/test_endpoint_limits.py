"""`/metrics` under a flood (loopback only, bounded loops): idle connections are capped and
closed, so a real scrape gets through; a valid scraper is not queued behind wrong passwords.
(Stalled handshakes, clients that do not read, framing: tests/unit/core/test_http_attacks.py;
the flood of wrong passwords in detail: test_auth_flood.py.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import bcrypt
import pytest

from otelgpu.exporters.prometheus import auth
from otelgpu.exporters.prometheus.auth import BasicAuthenticator
from otelgpu.exporters.prometheus.config import BasicAuthConfig
from otelgpu.exporters.prometheus.server import MetricsServer
from tests.unit.exporters.prometheus.scrape_auth import BODY, HASH, PASSWORD, basic


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    servers: list[MetricsServer] = []

    async def start(**options: Any) -> MetricsServer:
        server = MetricsServer(
            host="127.0.0.1", port=0, current=lambda: BODY, on_scrape=lambda *_: None, **options
        )
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


async def _open_idle(port: int, n: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(n):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writers.append(writer)
    return writers


async def test_idle_connections_are_capped_and_a_real_scrape_gets_through(
    serve: Callable[..., Any],
) -> None:
    server = await serve(max_connections=8)
    idle = await _open_idle(server.port, 40)
    for _ in range(500):  # bounded: until the server has taken in as many as it may hold
        if server.connections >= 8:
            break
        await asyncio.sleep(0.01)
    assert server.connections <= 8
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{server.port}/metrics") as response,
    ):
        assert response.status == 200 and await response.text() == "up 1\n"
    for writer in idle:
        writer.close()


async def test_a_connection_that_never_sends_is_closed_after_the_idle_timeout(
    serve: Callable[..., Any],
) -> None:
    server = await serve(idle_timeout=0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    async with asyncio.timeout(10):  # aiohttp's default would hold it about an hour
        assert await reader.read() == b""
    writer.close()


@pytest.fixture
def gated_bcrypt(monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], threading.Event]:
    """bcrypt replaced by a check that records each password and waits for `gate`."""
    calls: list[bytes] = []
    gate = threading.Event()

    def gated(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        gate.wait(30)
        return bcrypt.checkpw(password, hashed)

    monkeypatch.setattr(auth, "_checkpw", gated)
    return calls, gate


async def test_a_valid_scraper_is_not_queued_behind_a_wrong_password_flood(
    serve: Callable[..., Any], gated_bcrypt: tuple[list[bytes], threading.Event]
) -> None:
    calls, gate = gated_bcrypt
    authenticator = BasicAuthenticator(BasicAuthConfig(username="prom", password_hash=HASH))  # type: ignore[arg-type]
    await authenticator.prepare()
    server = await serve(authenticator=authenticator)
    url = f"http://127.0.0.1:{server.port}/metrics"
    attacker = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    scraper = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))  # another peer
    )

    async def attack(n: int) -> int:  # a new password each time: every one must be checked
        async with attacker.get(url, headers={"Authorization": basic("prom", f"wrong{n}")}) as r:
            return r.status

    flood = [asyncio.create_task(attack(n)) for n in range(50)]
    for _ in range(500):  # bounded: wait until the first wrong password is being checked
        if calls:
            break
        await asyncio.sleep(0.01)
    for _ in range(50):  # and let the rest of the flood arrive
        await asyncio.sleep(0.01)
    valid = asyncio.create_task(
        scraper.get(url, headers={"Authorization": basic("prom", PASSWORD)})
    )
    for _ in range(50):
        await asyncio.sleep(0.01)
    gate.set()
    response = await valid
    statuses = await asyncio.gather(*flood)
    await attacker.close()
    await scraper.close()
    authenticator.close()
    assert response.status == 200
    # At most the check running when it came, and one waiting, went before the valid one.
    assert calls.index(PASSWORD.encode()) <= 2
    # The flood's excess was shed at once, not queued; the checked ones were refused.
    assert set(statuses) <= {401, 429, 503} and statuses.count(401) <= 3
