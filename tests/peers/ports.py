"""Loopback ports for the tests' servers and agents."""

from __future__ import annotations

import errno
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


def free_port_everywhere() -> int:
    """A port free on every interface, IPv4 and IPv6, for a server given no host (":PORT").
    A port free on 127.0.0.1 alone can still be held on another address (an outgoing
    connection's local port on the node's own address), and binding every interface then fails
    with "address already in use"."""
    while True:
        with socket.socket(socket.AF_INET) as sock:
            sock.bind(("0.0.0.0", 0))
            port = int(sock.getsockname()[1])
            if port in _HANDED_OUT or not _free_on_ipv6(port):
                continue
        _HANDED_OUT.add(port)
        return port


def _free_on_ipv6(port: int) -> bool:
    if not socket.has_ipv6:
        return True
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(("::", port))
    except OSError as exc:
        return exc.errno not in (errno.EADDRINUSE, errno.EACCES)
    return True
