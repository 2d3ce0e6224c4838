"""`/metrics` with basic auth under a 200-client wrong-password flood (TARGETS.md S5): one
repeating a wrong password, and one guessing a new password each time.

bcrypt is replaced by a check that waits for a gate, so a test holds every check slot for as
long as it likes and then looks at what was answered, what is held and in which order checks
ran: nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable

import aiohttp
import bcrypt
import pytest

from otelgpu.exporters.prometheus import auth
from otelgpu.exporters.prometheus.auth import BasicAuthenticator
from otelgpu.exporters.prometheus.config import BasicAuthConfig
from otelgpu.exporters.prometheus.server import MetricsServer
from tests.unit.exporters.prometheus.scrape_auth import BODY, HASH, PASSWORD, basic

FLOOD_ADDRESSES = [f"127.0.0.{i}" for i in range(10, 30)]  # 20 addresses, 10 clients each
DEADLINE = 30.0


async def until(condition: Callable[[], bool], what: str) -> None:
    give_up = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > give_up:
            pytest.fail(f"still waiting, after {DEADLINE:.0f} s, for {what}")
        await asyncio.sleep(0.01)


class Gate:
    """bcrypt that records each password it is asked about and runs only while open."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[bytes] = []
        self.open = threading.Event()
        self.open.set()

        def gated(password: bytes, hashed: bytes) -> bool:
            self.calls.append(password)
            self.open.wait(DEADLINE)
            return bcrypt.checkpw(password, hashed)

        monkeypatch.setattr(auth, "_checkpw", gated)


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
        fields = dict(
            line.split(b": ", 1) for line in head.rstrip(b"\r\n").split(b"\r\n")[1:]
        )
        await self._reader.readexactly(int(fields[b"Content-Length"]))
        return int(head.split(b" ", 2)[1])

    def close(self) -> None:
        self._writer.close()


@contextlib.asynccontextmanager
async def flooded(
    monkeypatch: pytest.MonkeyPatch, scrapers_before: tuple[str, ...] = ()
) -> AsyncIterator[tuple[MetricsServer, Gate, Clients, list[asyncio.Task[int]]]]:
    """A server whose 20 flooding addresses have each failed once already (and whose
    `scrapers_before` have each passed once), now holding every place in line the flood can
    get with the gate closed (200 wrong-password requests: those held, and the rest answered
    429 / 503)."""
    gate = Gate(monkeypatch)
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
    clients = Clients(f"http://127.0.0.1:{server.port}/metrics")
    flood: list[asyncio.Task[int]] = []
    try:
        for address in scrapers_before:
            assert await clients.get(address, PASSWORD) == 200
        for address in FLOOD_ADDRESSES:  # each address fails once
            assert await clients.get(address, "wrong") == 401
        gate.open.clear()
        before = len(gate.calls)
        flood = [  # a new password each time (guessing): every one must be checked
            asyncio.create_task(clients.get(address, f"guess-{address}-{n}"))
            for address in FLOOD_ADDRESSES
            for n in range(10)
        ]
        await until(lambda: len(gate.calls) > before, "a flood check to run")
        held = auth.MAX_PENDING  # running or waiting; every other request is refused at once
        await until(
            lambda: sum(task.done() for task in flood) == len(flood) - held,
            f"all but {held} of the flood's requests to be refused",
        )
        refused = [task.result() for task in flood if task.done()]
        assert set(refused) <= {429, 503}
        yield server, gate, clients, flood
    finally:
        gate.open.set()
        await asyncio.gather(*flood, return_exceptions=True)
        await clients.close()
        await server.stop()


async def test_a_new_scraper_is_checked_next_during_a_flood_from_addresses_that_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first scrape from an address with no failed check waits for the check running now
    and no other: it takes the place of a check from an address that failed before (answered
    503 at once) and runs ahead of all of them."""
    async with flooded(monkeypatch) as (_, gate, clients, flood):
        running = len(gate.calls)
        answered = sum(task.done() for task in flood)
        scrape = asyncio.create_task(clients.get("127.0.0.2", PASSWORD))
        await until(
            lambda: scrape.done() or sum(task.done() for task in flood) > answered,
            "the scrape to displace a flood check",
        )
        assert not scrape.done(), scrape.result()  # not refused for want of a place
        gate.open.set()
        assert await scrape == 200
        assert gate.calls[running] == PASSWORD.encode()  # right after the check then running


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
    clients = Clients(f"http://127.0.0.1:{server.port}/metrics")
    flood = [
        asyncio.create_task(clients.get(address, f"guess-{address}-{n}"))
        for address in FLOOD_ADDRESSES
        for n in range(10)
    ]
    scrape: asyncio.Task[int] | None = None
    scraper: KeepAlive | None = None
    try:
        held = auth.MAX_PENDING  # running or waiting; every other request is refused at once
        await until(
            lambda: sum(task.done() for task in flood) == len(flood) - held,
            f"all but {held} of the flood's requests to be refused",
        )
        assert {task.result() for task in flood if task.done()} <= {429, 503}
        running = len(gate.calls)
        scraper = await KeepAlive.open(server.port, address)
        scrape = asyncio.create_task(scraper.get(PASSWORD))
        await until(
            lambda: scrape.done() or sum(task.done() for task in flood) > len(flood) - held,
            "the scrape to displace a flood check",
        )
        assert not scrape.done(), scrape.result()  # not refused for want of a place
        gate.open.set()
        assert await scrape == 200
        assert gate.calls[running] == PASSWORD.encode()  # right after the check then running
    finally:
        gate.open.set()
        await asyncio.gather(*flood, *([scrape] if scrape else []), return_exceptions=True)
        if scraper is not None:
            scraper.close()
        await clients.close()
        await server.stop()


async def test_a_scraper_behind_the_flood_s_address_is_checked_next_on_its_new_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scraper sharing its address (a NAT) with a guessing flood of 10 keep-alive
    connections per address, all open before their address failed: its own connection is
    newer than the failure and has not failed, so its first check displaces one of the
    flood's checks from its address and runs right after the check running when it came."""
    gate = Gate(monkeypatch)
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
    connections = [
        await KeepAlive.open(server.port, address)
        for address in FLOOD_ADDRESSES
        for _ in range(10)
    ]
    flood: list[asyncio.Task[int]] = []
    scrape: asyncio.Task[int] | None = None
    scraper: KeepAlive | None = None
    try:
        for first in connections[::10]:  # each address fails once, on one of its connections
            assert await first.get("wrong") == 401
        gate.open.clear()
        flood = [
            asyncio.create_task(connection.get(f"guess-{n}"))
            for n, connection in enumerate(connections)
        ]
        held = auth.MAX_PENDING  # running or waiting; every other request is refused at once
        await until(
            lambda: sum(task.done() for task in flood) == len(flood) - held,
            f"all but {held} of the flood's requests to be refused",
        )
        assert {task.result() for task in flood if task.done()} <= {429, 503}
        running = len(gate.calls)
        scraper = await KeepAlive.open(server.port, FLOOD_ADDRESSES[0])
        scrape = asyncio.create_task(scraper.get(PASSWORD))
        await until(
            lambda: scrape.done() or sum(task.done() for task in flood) > len(flood) - held,
            "the scrape to displace a flood check",
        )
        assert not scrape.done(), scrape.result()  # not refused for want of a place
        gate.open.set()
        assert await scrape == 200
        assert gate.calls[running] == PASSWORD.encode()  # right after the check then running
    finally:
        gate.open.set()
        await asyncio.gather(*flood, *([scrape] if scrape else []), return_exceptions=True)
        for connection in [*connections, *([scraper] if scraper else [])]:
            connection.close()
        await server.stop()


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


async def test_a_flood_from_one_address_is_refused_per_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The per-address bound: a third concurrent check from one address gets 429 at once."""
    gate = Gate(monkeypatch)
    gate.open.clear()
    checker = authenticator()
    await checker.prepare()

    async def attempt(password: str) -> bool:
        return await checker.check(basic("prom", password), peer="127.0.0.9")

    first, second = asyncio.create_task(attempt("a")), asyncio.create_task(attempt("b"))
    await until(lambda: checker.pending == 2, "two checks held for the address")
    with pytest.raises(auth.AuthBusy) as busy:
        await attempt("c")
    assert busy.value.status == 429
    gate.open.set()
    assert await asyncio.gather(first, second) == [False, False]
    assert checker.failed_before("127.0.0.9") and checker.pending == 0
    checker.close()


async def test_standing_follows_what_an_address_and_its_connections_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An address is clean, then refused a place, then failed, then clean again once a check
    from it passes. A connection is suspect once it was refused or failed, or if it was open
    when its address was first refused; one opened since stands better until it fails too."""
    gate = Gate(monkeypatch)
    gate.open.clear()
    checker = authenticator()
    await checker.prepare()
    loop = asyncio.get_running_loop()
    old, older = loop.time(), loop.time() - 1
    assert checker.standing("127.0.0.9", old) == (False, auth.CLEAN)
    held = [
        asyncio.create_task(checker.check(basic("prom", f"wrong-{n}"), "127.0.0.9", old))
        for n in range(auth.PER_PEER)
    ]
    await asyncio.sleep(0)  # each runs up to its wait for a turn (the loop's order)
    with pytest.raises(auth.AuthBusy):
        await checker.check(basic("prom", "wrong"), peer="127.0.0.9", opened=older)
    assert checker.standing("127.0.0.9", older) == (True, auth.REFUSED)
    assert checker.standing("127.0.0.9", old) == (True, auth.REFUSED)  # open when refused
    gate.open.set()
    assert await asyncio.gather(*held) == [False] * auth.PER_PEER
    assert checker.standing("127.0.0.9", old) == (True, auth.FAILED)
    newer = loop.time()
    assert checker.standing("127.0.0.9", newer) == (False, auth.FAILED)
    assert not await checker.check(basic("prom", "other"), peer="127.0.0.9", opened=newer)
    assert checker.standing("127.0.0.9", newer) == (True, auth.FAILED)
    assert checker.standing("127.0.0.9", loop.time()) == (False, auth.FAILED)
    assert await checker.check(basic("prom", PASSWORD), peer="127.0.0.9", opened=loop.time())
    assert checker.standing("127.0.0.9", loop.time()) == (False, auth.CLEAN)
    assert checker.standing("127.0.0.9", newer) == (True, auth.CLEAN)  # it failed itself
    checker.close()


async def test_checks_run_by_standing_then_arrival_whatever_the_order_they_came_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = Gate(monkeypatch)
    checker = authenticator()
    await checker.prepare()
    loop = asyncio.get_running_loop()
    old = loop.time()
    assert not await checker.check(basic("prom", "wrong"), peer="127.0.0.9", opened=old)
    newer = loop.time()
    gate.open.clear()

    def attempt(password: str, peer: str, opened: float) -> asyncio.Task[bool]:
        return asyncio.create_task(checker.check(basic("prom", password), peer, opened))

    attempts = [attempt("running", "127.0.0.1", newer)]
    await until(lambda: len(gate.calls) == 1, "a check to hold the bcrypt thread")
    attempts += [
        attempt("failed connection", "127.0.0.9", old),
        attempt("new connection", "127.0.0.9", newer),
        attempt("refused 1", "127.0.0.8", newer),
        attempt("refused 2", "127.0.0.8", newer),
        attempt("clean", "127.0.0.7", newer),
    ]
    await asyncio.sleep(0)  # each runs up to its wait for a turn (the loop's order)
    with pytest.raises(auth.AuthBusy) as busy:
        await checker.check(basic("prom", "refused 3"), "127.0.0.8", newer)
    assert busy.value.status == 429  # and 127.0.0.8 is now remembered as refused
    gate.open.set()
    assert await asyncio.gather(*attempts) == [False] * len(attempts)
    assert gate.calls[2:] == [  # after the first failure and the check then running
        b"clean",
        b"new connection",  # not suspect, from an address that failed
        b"refused 1",  # suspect (open when its address was refused), an address refused
        b"refused 2",
        b"failed connection",  # suspect, an address that failed
    ]
    checker.close()


async def test_a_full_line_gives_a_newcomer_the_place_of_a_check_that_stands_worse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every place held by checks from connections that failed (8 addresses, 2 each): a
    check of no better standing is refused 503 at once; a clean address's check takes the
    place of the worst waiting one (the last to come of the worst standing), which is
    answered 503; a new connection from a failed address holding both its places takes the
    place of that address's worst waiting check, answered 429."""
    gate = Gate(monkeypatch)
    checker = authenticator()
    await checker.prepare()
    loop = asyncio.get_running_loop()
    old = loop.time()
    flooding = [f"127.0.1.{n}" for n in range(auth.MAX_PENDING // auth.PER_PEER)]
    for peer in [*flooding, "127.0.2.1"]:
        assert not await checker.check(basic("prom", "wrong"), peer=peer, opened=old)
    newer = loop.time()
    checked = len(gate.calls)
    gate.open.clear()
    flood = [
        asyncio.create_task(checker.check(basic("prom", f"guess-{peer}-{n}"), peer, old))
        for n in range(auth.PER_PEER)
        for peer in flooding
    ]
    await asyncio.sleep(0)  # each runs up to its wait for a turn (the loop's order)
    assert checker.pending == auth.MAX_PENDING
    with pytest.raises(auth.AuthBusy) as busy:
        await checker.check(basic("prom", "guess"), peer="127.0.2.1", opened=old)
    assert busy.value.status == 503
    newcomer = asyncio.create_task(checker.check(basic("prom", PASSWORD), "127.0.0.2", newer))
    await until(lambda: any(task.done() for task in flood), "a flood check to be displaced")
    assert [task.done() for task in flood] == [False] * (len(flood) - 1) + [True]
    assert isinstance(flood[-1].exception(), auth.AuthBusy)
    assert flood[-1].exception().status == 503  # type: ignore[union-attr]
    behind_nat = asyncio.create_task(checker.check(basic("prom", "x"), flooding[0], newer))
    displaced = flood[len(flooding)]  # the later of the two checks of flooding[0]
    await until(displaced.done, "the check of its own address to be displaced")
    assert displaced.exception().status == 429  # type: ignore[union-attr]
    assert not behind_nat.done()
    assert checker.pending == auth.MAX_PENDING
    gate.open.set()
    assert await newcomer and not await behind_nat
    assert gate.calls[checked + 1 : checked + 3] == [PASSWORD.encode(), b"x"]
    await asyncio.gather(*flood, return_exceptions=True)
    checker.close()


async def test_a_repeated_wrong_password_holds_no_place_in_line_so_its_address_is_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """200 requests repeating a wrong password that already failed, from the scraper's own
    address and 19 others: each is refused 401 at once with no check and no place in line,
    and the scraper sharing the flood's address has its first check run next (it was answered
    429 on every try while the flood held its address's places)."""
    gate = Gate(monkeypatch)
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
    clients = Clients(f"http://127.0.0.1:{server.port}/metrics")
    flood: list[asyncio.Task[int]] = []
    shared = FLOOD_ADDRESSES[0]
    try:
        assert await clients.get(shared, "wrong") == 401  # its one check
        gate.open.clear()
        checked = len(gate.calls)
        flood = [
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
    finally:
        gate.open.set()
        await asyncio.gather(*flood, return_exceptions=True)
        await clients.close()
        await server.stop()


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
