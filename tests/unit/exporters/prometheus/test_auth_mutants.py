"""Basic auth on `/metrics` at its edges: how many passed credentials are remembered, and
that a header whose base64 is not strictly valid is refused even for a remembered pair."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from otelgpu.exporters.prometheus import auth
from otelgpu.exporters.prometheus.auth import BasicAuthenticator
from otelgpu.exporters.prometheus.server import MetricsServer
from tests.unit.exporters.prometheus.scrape_auth import (
    BODY,
    PASSWORD,
    basic,
    prepared_checker,
)

REMEMBERED = 256  # distinct (user, password) pairs that passed, remembered at most


@pytest.fixture
async def authenticator() -> AsyncIterator[BasicAuthenticator]:
    checker = await prepared_checker()
    yield checker
    checker.close()


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
