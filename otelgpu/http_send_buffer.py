"""The send buffer of the agent's HTTP connections, and how much of a big answer is handed to
the transport at once.

A connection asks for a buffer that holds a whole 10k-series plain body where the kernel
allows more than TCP autotuning would reach (`net.core.wmem_max` over half of
`net.ipv4.tcp_wmem`'s maximum); one `send` then hands the body over. Elsewhere (every default
kernel) the kernel takes a big body in parts, and asyncio's transport copies whatever one
`send` did not take, twice: so a big body goes to the transport in slices of itself
(`BODY_SLICE`), the next once the one before has left, and at most one slice's rest is copied.
"""

from __future__ import annotations

import functools
import socket

_SEND_BUFFER = 8 * 1024 * 1024  # a 10k-series plain body is ~6.4 MB
_WMEM_MAX = "/proc/sys/net/core/wmem_max"  # the most SO_SNDBUF may ask for
_TCP_WMEM = "/proc/sys/net/ipv4/tcp_wmem"  # min, default, most autotuning grows a buffer to
BODY_SLICE = 1024 * 1024  # the most of a big answer handed over at once under autotuning


def size_send_buffer(sock: socket.socket | None) -> int | None:
    """Asks for the send buffer where that beats autotuning: what was granted, or None."""
    size = send_buffer_size()
    if size is None or sock is None:
        return None
    try:  # best effort: autotuning still works without it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
        return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
    except OSError:
        return None


def body_slice(granted: int | None) -> int:
    """The most of a big answer handed to the transport at once: the send buffer granted (a
    body it holds then leaves in one `send`, as the kernel takes it whole), never less than
    BODY_SLICE; under autotuning, BODY_SLICE."""
    return BODY_SLICE if granted is None else max(BODY_SLICE, granted)


@functools.cache
def send_buffer_size() -> int | None:
    """The SO_SNDBUF accepted connections ask for, or None to leave them to TCP autotuning
    (read from this kernel's limits once)."""
    try:
        with open(_WMEM_MAX, encoding="ascii") as file:
            wmem_max = int(file.read())
        with open(_TCP_WMEM, encoding="ascii") as file:
            autotune_max = int(file.read().split()[2])
    except (OSError, ValueError, IndexError):  # not Linux, or no /proc
        return None
    return choose_send_buffer(wmem_max, autotune_max)


def choose_send_buffer(wmem_max: int, autotune_max: int, wanted: int = _SEND_BUFFER) -> int | None:
    """`wanted` as far as `net.core.wmem_max` allows, when that beats autotuning: Linux
    doubles the value asked (for its bookkeeping) and stops autotuning that socket, so asking
    is only worth it when twice the granted size exceeds `net.ipv4.tcp_wmem`'s maximum. On a
    default kernel (wmem_max 208 KiB, tcp_wmem max 4 MiB) it is not, and nothing is set."""
    asked = min(wanted, wmem_max)
    return asked if 2 * asked > autotune_max else None
