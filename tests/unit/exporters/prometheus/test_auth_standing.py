"""The line bcrypt checks wait in (`auth._Line`): a request's standing from what its address
and its connection did, the order checks run in, the places an address and the line hold, and
who takes whose place when they are full.

bcrypt is replaced by a check that waits for a gate (`scrape_auth.Gate`), and connections are
told apart by when they were accepted (`opened`, the loop's clock), so each test sets up
exactly the standings it needs.
"""

from __future__ import annotations

import asyncio

import pytest

from otelgpu.exporters.prometheus import auth
from tests.unit.exporters.prometheus.scrape_auth import (
    PASSWORD,
    Gate,
    basic,
    prepared_checker,
    until,
)


async def test_a_flood_from_one_address_is_refused_per_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The per-address bound: a third concurrent check from one address gets 429 at once."""
    gate = Gate(monkeypatch)
    gate.open.clear()
    checker = await prepared_checker()

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
    checker = await prepared_checker()
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
    checker = await prepared_checker()
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
    checker = await prepared_checker()
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


async def test_a_reload_with_the_same_credentials_keeps_every_standing() -> None:
    """A SIGHUP in the middle of a flood: the next authenticator's line puts the flood's
    connections where the previous one did."""
    checker = await prepared_checker()
    loop = asyncio.get_running_loop()
    old = loop.time()
    assert not await checker.check(basic("prom", "wrong"), peer="127.0.0.9", opened=old)
    newer = loop.time()
    renewed = await prepared_checker()
    renewed.take_over(checker)
    assert renewed.standing("127.0.0.9", old) == (True, auth.FAILED)
    assert renewed.standing("127.0.0.9", newer) == (False, auth.FAILED)
    renewed.close()
    checker.close()


async def test_the_line_holds_16_checks_and_a_17th_of_equal_standing_is_refused_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The documented bound (docs/prometheus.md): 16 checks running or waiting, 2 from one
    address. Sixteen clean checks from eight addresses fill it; a seventeenth from a ninth
    clean address stands no better than any of them and is refused at once, saying why."""
    gate = Gate(monkeypatch)
    gate.open.clear()
    checker = await prepared_checker()
    opened = asyncio.get_running_loop().time()
    held = [
        asyncio.create_task(checker.check(basic("prom", f"g-{a}-{n}"), f"127.0.3.{a}", opened))
        for a in range(8)
        for n in range(2)
    ]
    try:
        await until(lambda: checker.pending == 16, "sixteen checks held")
        seventeenth = asyncio.create_task(
            checker.check(basic("prom", "seventeenth"), peer="127.0.3.9", opened=opened)
        )
        await asyncio.sleep(0)  # loop order, not time: the new task runs its first step (a
        # place refused before any wait) before this coroutine resumes
        assert seventeenth.done(), "the seventeenth check was given a place"
        busy = seventeenth.exception()
        assert isinstance(busy, auth.AuthBusy)
        assert (busy.status, str(busy)) == (503, "too many authentication attempts in progress")
        assert all(not task.done() for task in held)
    finally:
        gate.open.set()
    assert await asyncio.gather(*held) == [False] * 16
    checker.close()


async def test_what_is_remembered_of_addresses_connections_and_refused_pairs_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """4096 of each (docs/prometheus.md), the least recently marked forgotten first: after
    4097 failures, each from its own address and connection and with its own password, the
    first address is clean again, its connection no longer suspect and its pair checked
    anew; the second of each is still remembered."""
    checked: list[bytes] = []

    def refuse(password: bytes, _hashed: bytes) -> bool:
        checked.append(password)
        return False

    monkeypatch.setattr(auth, "_checkpw", refuse)
    checker = await prepared_checker()
    later = asyncio.get_running_loop().time() + 1000.0  # opened after every mark: only the
    # connection's own record makes it suspect
    for n in range(4097):
        peer = f"10.{n // 65536}.{n // 256 % 256}.{n % 256}"
        assert not await checker.check(basic("prom", f"w-{n}"), peer, later + n)
    assert len(checked) == 4097
    assert not checker.failed_before("10.0.0.0") and checker.failed_before("10.0.0.1")
    assert checker.standing("10.0.0.0", later) == (False, auth.CLEAN)
    assert checker.standing("10.0.0.1", later + 1) == (True, auth.FAILED)
    assert checker.standing("10.0.0.1", later + 1.5) == (False, auth.FAILED)
    assert not await checker.check(basic("prom", "w-1"), "10.0.0.1", later + 1)
    assert len(checked) == 4097  # remembered: answered without a check
    assert not await checker.check(basic("prom", "w-0"), "10.0.0.0", later)
    assert checked[4097:] == [b"w-0"]  # forgotten: checked again
    checker.close()
