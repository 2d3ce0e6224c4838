"""What the kernel and asyncio may hold of an answer, per connection of the agent's endpoints.

Every accepted connection asks for the same small send buffer, `SEND_BUFFER` (64 KiB; Linux
grants twice what is asked, for its bookkeeping, so ~128 KiB), whatever the node's sysctls
allow. Asking turns TCP autotuning off for that socket: left to autotuning, a buffer grows up
to `net.ipv4.tcp_wmem`'s maximum (4 MiB by default, more where raised), and sized for a whole
body it would let every client that stops reading pin that much kernel memory, charged to the
agent's container. 64 KiB is ~1 ms of data at 0.5 Gbit/s: a 170 kB gzip body still leaves in
a few sends on a cluster network.

Above the kernel, a big answer goes to asyncio's transport in slices of the body object itself
(`BODY_SLICE`), the next once the one before has been handed to the kernel: the transport
copies whatever one `send` did not take, so at most one slice's rest is copied per connection.

When a connection is dropped (`abort`) while the kernel still holds answer bytes the client
never read, it is closed with a reset (`reset_on_close`): a plain close would leave those bytes
queued on an orphaned socket, retried for minutes after the agent let go of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import socket
import struct
import termios
from typing import Protocol

SEND_BUFFER = 64 * 1024  # SO_SNDBUF asked for each connection
BODY_SLICE = 128 * 1024  # the most of an answer handed to the transport at once
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets, dropping the queue


class Sockopts(Protocol):
    """The socket calls used here (asyncio hands out a `TransportSocket` with these)."""

    def fileno(self) -> int: ...

    def setsockopt(self, level: int, option: int, value: int | bytes, /) -> None: ...


def size_send_buffer(sock: Sockopts | None) -> None:
    """Asks for `SEND_BUFFER` on an accepted socket (best effort: a socket that refuses keeps
    the kernel's default)."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)


def kernel_unsent(sock: Sockopts | None) -> int:
    """Bytes still in the socket's send queue (not yet acknowledged by the client): Linux's
    SIOCOUTQ; 0 where it cannot be asked."""
    if sock is None:
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except (OSError, ValueError):  # not Linux, or already closed
        return 0
    return int(struct.unpack("i", raw)[0])


def reset_on_close(sock: Sockopts | None) -> None:
    """Makes the next close of `sock` a reset that drops its send queue, when anything is
    still queued; a socket whose queue is empty keeps an orderly close."""
    if sock is None or kernel_unsent(sock) == 0:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
