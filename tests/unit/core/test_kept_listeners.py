"""KeptListeners: what is taken back, what is stopped, and when."""

from __future__ import annotations

from otelgpu.component.kept_listeners import KeptListeners


class Server:
    def __init__(self) -> None:
        self.stopped = 0

    async def stop(self) -> None:
        self.stopped += 1


class OtherServer(Server):
    pass


class Failing(Server):
    async def stop(self) -> None:
        raise OSError("close failed")


async def test_the_same_address_and_setup_takes_the_server_back_unstopped() -> None:
    listeners, server = KeptListeners(), Server()
    assert listeners.park("127.0.0.1", 9400, ("tls", 1), server)
    assert await listeners.take("127.0.0.1", 9400, ("tls", 1), Server) is server
    assert server.stopped == 0 and listeners.ports == []


async def test_a_changed_setup_host_or_kind_stops_the_parked_server_and_frees_the_port() -> None:
    for host, setup, kind in [
        ("127.0.0.1", ("tls", 2), Server),
        ("0.0.0.0", ("tls", 1), Server),
        ("127.0.0.1", ("tls", 1), OtherServer),
    ]:
        listeners, server = KeptListeners(), Server()
        listeners.park("127.0.0.1", 9400, ("tls", 1), server)
        assert await listeners.take(host, 9400, setup, kind) is None
        assert server.stopped == 1 and listeners.ports == []


async def test_port_zero_is_not_parked() -> None:
    assert not KeptListeners().park("127.0.0.1", 0, None, Server())


async def test_close_all_stops_what_nobody_took_even_past_a_failing_one() -> None:
    listeners, first, second = KeptListeners(), Server(), Server()
    listeners.park("127.0.0.1", 1, None, first)
    listeners.park("127.0.0.1", 2, None, Failing())
    listeners.park("127.0.0.1", 3, None, second)
    await listeners.close_all()
    assert first.stopped == second.stopped == 1 and listeners.ports == []
    assert await listeners.take("127.0.0.1", 1, None, Server) is None


async def test_a_kept_memory_is_adopted_once_by_its_key_and_kind() -> None:
    kept = KeptListeners()
    memory = {"sent": 1}
    kept.keep(("otlp", "a"), memory)
    assert kept.adopt(("otlp", "b"), dict) is None  # another key
    assert kept.adopt(("otlp", "a"), list) is None  # another kind: not handed out, dropped
    kept.keep(("otlp", "a"), memory)
    assert kept.adopt(("otlp", "a"), dict) is memory
    assert kept.adopt(("otlp", "a"), dict) is None  # taken


async def test_memories_nobody_adopted_are_dropped_with_the_unclaimed_servers() -> None:
    kept = KeptListeners()
    kept.keep("k", object())
    await kept.close_all()
    assert kept.adopt("k", object) is None
