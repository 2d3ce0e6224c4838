"""`/metrics` with basic auth under a 200-client wrong-password flood (TARGETS.md S5): one
repeating a wrong password, and one guessing a new password each time.

bcrypt is replaced by a check that waits for a gate (`scrape_auth.Gate`), so a test holds every
place in line for as long as it likes and then looks at what was answered, what is held and in
which order checks ran: nothing here depends on how fast the machine is. The line's own rules
(standing, places, who displaces whom) are in test_auth_standing.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator

import aiohttp
import bcrypt
import pytest

from otelgpu.exporters.prometheus import auth
from otelgpu.exporters.prometheus.auth import BasicAuthenticator
from otelgpu.exporters.prometheus.config import BasicAuthConfig
from otelgpu.exporters.prometheus.server import MetricsServer
from tests.unit.exporters.prometheus.scrape_auth import (
    BODY,
    DEADLINE,
    HASH,
    PASSWORD,
    Gate,
    basic,
    until,
)

FLOOD_ADDRESSES = [f"127.0.0.{i}" for i in range(10, 30)]  # 20 addresses, 10 clients each


def authenticator() -> BasicAuthenticator:
    return BasicAuthenticator(BasicAuthConfig(username="prom", password_hash=HASH))  # type: ignore[arg-type]


class Clients:
    """HTTP sessions from given loopback addresses (one connection pool per address)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._sessions: dict[str, aiohttp.ClientSession] = {}

    async def get(self, address: str, password: str) -> int:
        session = self._sessions.get(address)
        if session is None:
            connector = aiohttp.TCPConnector(limit=0, local_addr=(address, 0))
            session = self._sessions[address] = aiohttp.ClientSession(connector=connector)
        headers = {"Authorization": basic("prom", password)}
        async with session.get(self.url, headers=headers) as response:
            await response.read()
            return response.status

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()


class KeepAlive:
    """One keep-alive connection from a given loopback address, asking one request at a time
    (as a flooding client or Prometheus does)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    @classmethod
    async def open(cls, port: int, address: str) -> KeepAlive:
        return cls(*await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0)))

    async def get(self, password: str) -> int:
        authorization = basic("prom", password)
        self._writer.write(
            f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: {authorization}\r\n\r\n".encode()
        )
        head = await self._reader.readuntil(b"\r\n\r\n")
        fields = dict(line.split(b": ", 1) for line in head.rstrip(b"\r\n").split(b"\r\n")[1:])
        await self._reader.readexactly(int(fields[b"Content-Length"]))
        return int(head.split(b" ", 2)[1])

    def close(self) -> None:
        self._writer.close()


@dataclasses.dataclass
class Serving:
    server: MetricsServer
    clients: Clients
    flood: list[asyncio.Task[int]]  # the flood's requests, added by the test


@contextlib.asynccontextmanager
async def serving(gate: Gate) -> AsyncIterator[Serving]:
    """`/metrics` with basic auth on a free loopback port, and clients for it. At the end the
    gate opens, every request of the flood is answered, and the clients and server close."""
    checker = authenticator()
    await checker.prepare()
    server = MetricsServer(
        host="127.0.0.1",
        port=0,
        current=lambda: BODY,
        on_scrape=lambda *_: None,
        authenticator=checker,
    )
    await server.start()
    serving = Serving(server, Clients(f"http://127.0.0.1:{server.port}/metrics"), [])
    try:
        yield serving
    finally:
        gate.open.set()
        await asyncio.gather(*serving.flood, return_exceptions=True)
        await serving.clients.close()
        await server.stop()


async def all_but_held_refused(flood: list[asyncio.Task[int]]) -> None:
    """Waits until the flood holds every place in line and the rest of it was answered
    429 / 503 at once."""
    held = auth.MAX_PENDING  # running or waiting
    await until(
        lambda: sum(task.done() for task in flood) == len(flood) - held,
        f"all but {held} of the flood's requests to be refused",
    )
    assert {task.result() for task in flood if task.done()} <= {429, 503}


@contextlib.asynccontextmanager
async def flooded(
    monkeypatch: pytest.MonkeyPatch, scrapers_before: tuple[str, ...] = ()
) -> AsyncIterator[tuple[MetricsServer, Gate, Clients, list[asyncio.Task[int]]]]:
    """A server whose 20 flooding addresses have each failed once already (and whose
    `scrapers_before` have each passed once), now holding every place in line the flood can
    get with the gate closed (200 wrong-password requests: those held, and the rest answered
    429 / 503)."""
    gate = Gate(monkeypatch)
    async with serving(gate) as served:
        server, clients, flood = served.server, served.clients, served.flood
        for address in scrapers_before:
            assert await clients.get(address, PASSWORD) == 200
        for address in FLOOD_ADDRESSES:  # each address fails once
            assert await clients.get(address, "wrong") == 401
        gate.open.clear()
        flood += [  # a new password each time (guessing): every one must be checked
            asyncio.create_task(clients.get(address, f"guess-{address}-{n}"))
            for address in FLOOD_ADDRESSES
            for n in range(10)
        ]
        await all_but_held_refused(flood)
        yield server, gate, clients, flood


async def scraper_checked_next(
    server: MetricsServer, gate: Gate, flood: list[asyncio.Task[int]], address: str
) -> None:
    """Once every place in line is held by the flood (the gate closed) and the rest of it was
    refused at once, a scraper's first scrape on a new connection from `address` takes the
    place of a flood check (answered at once), and its check runs right after the one
    running when it came."""
    await all_but_held_refused(flood)
    answered = sum(task.done() for task in flood)
    await until(lambda: gate.held == 1, "a flood check to hold the bcrypt thread")
    running = len(gate.calls)  # the check in the gate is the last one called
    scraper = await KeepAlive.open(server.port, address)
    scrape = asyncio.create_task(scraper.get(PASSWORD))
    try:
        await until(
            lambda: scrape.done() or sum(task.done() for task in flood) > answered,
            "the scrape to displace a flood check",
        )
        assert not scrape.done(), scrape.result()  # not refused for want of a place
        gate.open.set()
        assert await scrape == 200
        assert gate.calls[running] == PASSWORD.encode()  # right after the check then running
    finally:
        gate.open.set()
        await asyncio.gather(scrape, return_exceptions=True)
        scraper.close()


async def test_a_new_scraper_is_checked_next_during_a_flood_from_addresses_that_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first scrape from an address with no failed check waits for the check running now
    and no other: it takes the place of a check from an address that failed before (answered
    503 at once) and runs ahead of all of them."""
    async with flooded(monkeypatch) as (server, gate, _, flood):
        await scraper_checked_next(server, gate, flood, "127.0.0.2")


@pytest.mark.parametrize("address", ["127.0.0.2", FLOOD_ADDRESSES[0]], ids=["fresh", "flood's"])
async def test_a_new_scraper_is_checked_next_during_a_flood_from_addresses_never_refused_before(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    """A guessing flood from 20 addresses the server has not seen before (an agent that just
    started under a flood): every place in line goes to the flood's first requests, and the
    rest are refused at once. A scraper's first scrape, on a new connection, from a 21st
    address or from one of the flood's (refused, not failed yet), displaces a check from a
    connection that was refused (answered 429 / 503 at once), and is checked right after the
    check running when it came."""
    gate = Gate(monkeypatch)
    gate.open.clear()
    async with serving(gate) as served:
        served.flood += [
            asyncio.create_task(served.clients.get(flooding, f"guess-{flooding}-{n}"))
            for flooding in FLOOD_ADDRESSES
            for n in range(10)
        ]
        await scraper_checked_next(served.server, gate, served.flood, address)


async def test_a_scraper_behind_the_flood_s_address_is_checked_next_on_its_new_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scraper sharing its address (a NAT) with a guessing flood of 10 keep-alive
    connections per address, all open before their address failed: its own connection is
    newer than the failure and has not failed, so its first check displaces one of the
    flood's checks and runs right after the check running when it came."""
    gate = Gate(monkeypatch)
    async with serving(gate) as served:
        connections = [
            await KeepAlive.open(served.server.port, address)
            for address in FLOOD_ADDRESSES
            for _ in range(10)
        ]
        try:
            for first in connections[::10]:  # each address fails once, on one connection
                assert await first.get("wrong") == 401
            gate.open.clear()
            served.flood += [
                asyncio.create_task(connection.get(f"guess-{n}"))
                for n, connection in enumerate(connections)
            ]
            await scraper_checked_next(served.server, gate, served.flood, FLOOD_ADDRESSES[0])
        finally:
            for connection in connections:
                connection.close()


async def test_a_scraper_whose_password_passed_is_answered_while_the_flood_holds_every_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pair that passed once needs no check and no slot: the answer comes while every
    check the flood holds is still waiting (from another address of the scraper's too)."""
    async with flooded(monkeypatch, scrapers_before=("127.0.0.2",)) as flood:
        _, gate, clients, requests = flood
        held = [task for task in requests if not task.done()]
        for address in ("127.0.0.2", "127.0.0.3"):
            assert await asyncio.wait_for(clients.get(address, PASSWORD), DEADLINE) == 200
        assert gate.calls.count(PASSWORD.encode()) == 1  # its one check, before the flood
        assert len(held) == auth.MAX_PENDING and not any(task.done() for task in held)


async def test_a_reload_with_the_same_credentials_keeps_what_passed_and_what_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next exporter's authenticator (a SIGHUP) takes over the pairs that passed and the
    addresses and connections that failed, so a reload in the middle of a flood neither makes
    the scraper wait for a check again nor puts the flood's addresses back on a par with a
    newcomer's."""
    async with flooded(monkeypatch, scrapers_before=("127.0.0.2",)) as flood:
        server, gate, clients, _ = flood
        renewed = authenticator()
        await renewed.prepare()
        # (closing the old authenticator waits for its check in progress, held by the gate)
        reload = asyncio.create_task(server.serve(lambda: BODY, lambda *_: None, renewed))
        await until(lambda: renewed.remembers(basic("prom", PASSWORD)), "the take-over")
        assert all(renewed.failed_before(address) for address in FLOOD_ADDRESSES)
        assert await asyncio.wait_for(clients.get("127.0.0.2", PASSWORD), DEADLINE) == 200
        assert gate.calls.count(PASSWORD.encode()) == 1
        gate.open.set()
        await reload


async def test_another_user_or_hash_starts_afresh() -> None:
    first = authenticator()
    await first.prepare()
    assert await first.check(basic("prom", PASSWORD), peer="127.0.0.2")
    other_hash = bcrypt.hashpw(b"other", bcrypt.gensalt(rounds=4)).decode()
    for config in (
        BasicAuthConfig(username="prom", password_hash=other_hash),  # type: ignore[arg-type]
        BasicAuthConfig(username="other", password_hash=HASH),  # type: ignore[arg-type]
    ):
        renewed = BasicAuthenticator(config)
        await renewed.prepare()
        renewed.take_over(first)
        assert not renewed.remembers(basic("prom", PASSWORD))
        renewed.close()
    first.close()


async def test_a_repeated_wrong_password_holds_no_place_in_line_so_its_address_is_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """200 requests repeating a wrong password that already failed, from the scraper's own
    address and 19 others: each is refused 401 at once with no check and no place in line,
    and the scraper sharing the flood's address has its first check run next (it was answered
    429 on every try while the flood held its address's places)."""
    gate = Gate(monkeypatch)
    async with serving(gate) as served:
        clients, flood = served.clients, served.flood
        shared = FLOOD_ADDRESSES[0]
        assert await clients.get(shared, "wrong") == 401  # its one check
        gate.open.clear()
        checked = len(gate.calls)
        flood += [
            asyncio.create_task(clients.get(address, "wrong"))
            for address in FLOOD_ADDRESSES
            for _ in range(10)
        ]
        await until(
            # (at most every place in line may be held)
            lambda: sum(task.done() for task in flood) >= len(flood) - auth.MAX_PENDING,
            "the flood's requests to be answered",
        )
        assert {task.result() for task in flood if task.done()} == {401}
        scrape = asyncio.create_task(clients.get(shared, PASSWORD))
        await until(lambda: len(gate.calls) > checked, "the scraper's check to run")
        assert gate.calls[checked:] == [PASSWORD.encode()]  # no flood check before it
        gate.open.set()
        assert await scrape == 200
        assert await asyncio.gather(*flood) == [401] * len(flood)
        assert len(gate.calls) == checked + 1


async def test_checks_of_one_pair_that_arrive_together_share_one_check_and_no_places(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """200 checks of one new wrong pair from one address at once take one place in line and
    one bcrypt check; a scraper from the same address still gets a place of its own."""
    gate = Gate(monkeypatch)
    gate.open.clear()
    checker = authenticator()
    await checker.prepare()
    flood = [
        asyncio.create_task(checker.check(basic("prom", "wrong"), peer="127.0.0.9"))
        for _ in range(200)
    ]
    scrape: asyncio.Task[bool] | None = None
    try:
        await asyncio.sleep(0)  # every flood task runs up to its first wait (the loop's order)
        assert checker.pending == 1
        scrape = asyncio.create_task(checker.check(basic("prom", PASSWORD), peer="127.0.0.9"))
        await asyncio.sleep(0)
        assert not scrape.done()  # not refused 429: the flood holds one place of the two
        assert checker.pending == 2
        gate.open.set()
        assert await asyncio.gather(*flood) == [False] * len(flood)
        assert await scrape
        assert gate.calls == [b"wrong", PASSWORD.encode()]
        assert checker.failed_before("127.0.0.9") is False  # its last check passed
    finally:
        gate.open.set()
        await asyncio.gather(*flood, *([scrape] if scrape else []), return_exceptions=True)
        checker.close()


async def test_a_pair_checking_called_off_answers_those_sharing_it_503_not_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first check of a pair is called off (its client left while it waited for its turn):
    those sharing it are answered `AuthBusy(503)` at once, and the next try checks again."""
    gate = Gate(monkeypatch)
    gate.open.clear()
    checker = authenticator()
    await checker.prepare()
    running = asyncio.create_task(checker.check(basic("prom", "other"), peer="127.0.0.8"))
    await until(lambda: len(gate.calls) == 1, "a check to hold the bcrypt thread")
    first = asyncio.create_task(checker.check(basic("prom", "x"), peer="127.0.0.9"))
    await asyncio.sleep(0)
    sharing = asyncio.create_task(checker.check(basic("prom", "x"), peer="127.0.0.10"))
    await asyncio.sleep(0)
    assert checker.pending == 2  # `running` and `first`; `sharing` holds no place
    first.cancel()
    with pytest.raises(auth.AuthBusy) as busy:
        await sharing
    assert busy.value.status == 503
    gate.open.set()
    assert await running is False
    assert await checker.check(basic("prom", "x"), peer="127.0.0.10") is False
    assert gate.calls == [b"other", b"x"]
    checker.close()


async def test_an_address_whose_shared_check_passes_is_no_longer_taken_for_a_failed_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = Gate(monkeypatch)
    checker = authenticator()
    await checker.prepare()
    assert await checker.check(basic("prom", "wrong"), peer="127.0.0.9") is False
    gate.open.clear()
    owner = asyncio.create_task(checker.check(basic("prom", PASSWORD), peer="127.0.0.8"))
    await asyncio.sleep(0)
    sharing = asyncio.create_task(checker.check(basic("prom", PASSWORD), peer="127.0.0.9"))
    await asyncio.sleep(0)
    assert checker.pending == 1  # the sharing check holds no place in line
    gate.open.set()
    assert await asyncio.gather(owner, sharing) == [True, True]
    assert not checker.failed_before("127.0.0.9")
    assert gate.calls == [b"wrong", PASSWORD.encode()]
    checker.close()
