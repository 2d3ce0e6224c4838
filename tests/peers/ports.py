"""Loopback ports for the tests' servers and agents."""

from __future__ import annotations

import socket

_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free on 127.0.0.1 right now, and never one this process was handed before: two
    picks in a row can otherwise be the same port (the kernel may offer a just-closed one
    again), and two components of one pipeline then collide. Between the pick and the bind a
    small race with other processes remains, acceptable in tests."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
