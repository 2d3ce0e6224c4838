"""Loopback ports for the tests' servers and agents.

A port is picked here and bound later by another process (an agent, Prometheus, a peer), so
some other socket could take it in between. The usual taker is an outgoing connection: the
kernel gives each one a local port from its ephemeral range (`ip_local_port_range`), and the
suite's own agents, scrapers and peers make thousands. So ports are handed out from below that
range, where no outgoing connection is given one, starting from a random point (two test
processes on one machine seldom try the same ports), each checked free by binding it. A
machine whose ephemeral range leaves too little room below gets the kernel's picks, as
before."""

from __future__ import annotations

import errno
import random
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

_HANDED_OUT: set[int] = set()
FIRST = 20000  # below Linux's default ephemeral range (32768-60999) and IANA's (49152-65535)
ROOM = 2000  # the fewest ports below the range worth picking from
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A port free on 127.0.0.1 right now, outside the kernel's ephemeral range, and never
    one this process was handed before (two components of one pipeline must not collide)."""
    return _hand_out(lambda port: _bindable(socket.AF_INET, "127.0.0.1", port))


def free_port_everywhere() -> int:
    """A port free on every interface, IPv4 and IPv6, for a server given no host (":PORT").
    A port free on 127.0.0.1 alone can still be held on another address, and binding every
    interface then fails with "address already in use"."""
    return _hand_out(
        lambda port: (
            _bindable(socket.AF_INET, "0.0.0.0", port)
            and (not socket.has_ipv6 or _bindable(socket.AF_INET6, "::", port))
        )
    )


def _hand_out(free: Callable[[int], bool]) -> int:
    """The first candidate (`_candidates`) not handed out before that is `free`."""
    for port in _candidates():
        if port not in _HANDED_OUT and free(port):
            _HANDED_OUT.add(port)
            return port
    raise AssertionError("unreachable: the kernel's picks never run out")


def ephemeral_start(range_file: Path = _RANGE_FILE) -> int:
    """The first port of the kernel's ephemeral range (0 when it cannot be read: then every
    port is the kernel's pick)."""
    try:
        return int(range_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _candidates() -> Iterator[int]:
    """Ports below the ephemeral range from a random point, each once; then (or when there
    is too little room below the range) the kernel's picks, without end."""
    end = ephemeral_start()
    if end - FIRST >= ROOM:
        span = end - FIRST
        start = random.randrange(span)
        for step in range(span):
            yield FIRST + (start + step) % span
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            yield int(sock.getsockname()[1])


def _bindable(family: socket.AddressFamily, host: str, port: int) -> bool:
    """Whether `port` can be bound on `host` now (without SO_REUSEADDR: a port that a closed
    connection still holds in TIME_WAIT is not taken either)."""
    try:
        with socket.socket(family) as sock:
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((host, port))
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            return False
        if family == socket.AF_INET6:  # no IPv6 on this machine's loopback: nothing to clash
            return True
        raise
    return True
