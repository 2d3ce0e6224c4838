"""The tests' loopback ports: outside the kernel's ephemeral range, free, never twice."""

from __future__ import annotations

import socket
from itertools import chain
from pathlib import Path

import pytest

from tests.peers import ports


def test_ports_are_free_distinct_and_below_the_ephemeral_range() -> None:
    end = ports.ephemeral_start()
    handed = [ports.free_port() for _ in range(50)] + [ports.free_port_everywhere()]
    assert len(set(handed)) == len(handed)
    if end - ports.FIRST >= ports.ROOM:  # (this machine leaves room below its range)
        assert all(ports.FIRST <= port < end for port in handed)
    for port in handed:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_held_by_a_listener_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    candidates = ports._candidates
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(ports, "_candidates", lambda: chain([taken], candidates()))
        assert ports.free_port() != taken


def test_the_ephemeral_range_is_read_from_the_kernel_and_unknown_is_zero(tmp_path: Path) -> None:
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    assert ports.ephemeral_start(range_file) == 32768
    assert ports.ephemeral_start(tmp_path / "absent") == 0
    range_file.write_text("")
    assert ports.ephemeral_start(range_file) == 0
