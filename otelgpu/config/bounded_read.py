"""Reading a file the configuration names (a `-c` file, a `${file:...}` secret), bounded.

The files are read on every `validate` and every SIGHUP, from paths the agent did not choose.
Three things would make a plain `open().read()` hang or blow up, and each is refused with a
reason the config error names:

- a path that is not a regular file: a FIFO (whose `open` waits for a writer that may never
  come), a socket, a device (`/dev/zero` never ends, `/dev/tty` waits for a line), a
  directory. The file is opened non-blocking, so even a FIFO's open returns at once, and its
  type is checked on the open descriptor (no window for a swap between a check and the open);
- a file larger than the caller's limit: at most `limit + 1` bytes are ever read;
- a read that does not finish within `timeout` seconds (a hung network mount): it runs on a
  daemon thread, which is left behind (it never holds the exit) and the read is refused.
"""

from __future__ import annotations

import os
import stat
import threading

# A config file or a mounted secret is read in milliseconds; past this, its mount is hung.
READ_TIMEOUT = 5.0
_KINDS = (
    (stat.S_ISFIFO, "not a regular file (a FIFO)"),
    (stat.S_ISSOCK, "not a regular file (a socket)"),
    (stat.S_ISCHR, "not a regular file (a character device)"),
    (stat.S_ISBLK, "not a regular file (a block device)"),
    (stat.S_ISDIR, "Is a directory"),  # as the system says it (EISDIR)
)


class Unreadable(Exception):
    """The file cannot be used; the message says why, as `strerror` would (the caller names
    the file)."""


class TooLarge(Unreadable):
    """The file holds more bytes than the caller's limit."""


def read_bounded(path: str, limit: int, timeout: float = READ_TIMEOUT) -> bytes:
    """The bytes of the regular file at `path`. Raises Unreadable when it is not a regular
    file, cannot be opened or read, holds more than `limit` bytes, or takes over `timeout`
    seconds."""
    outcome: list[bytes | Unreadable] = []
    reader = threading.Thread(
        target=lambda: outcome.append(_read(path, limit)), name="otelgpu config read", daemon=True
    )
    reader.start()
    reader.join(timeout)
    if not outcome:
        raise Unreadable(f"no answer within {timeout:g}s (a hung mount?)")
    result = outcome[0]
    if isinstance(result, Unreadable):
        raise result
    return result


def _read(path: str, limit: int) -> bytes | Unreadable:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        return Unreadable(exc.strerror or str(exc))
    try:
        mode = os.fstat(fd).st_mode
        for test, kind in _KINDS:
            if test(mode):
                return Unreadable(kind)
        if not stat.S_ISREG(mode):
            return Unreadable("not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            return TooLarge(f"larger than {_size(limit)}")
        return b"".join(chunks)
    except OSError as exc:
        return Unreadable(exc.strerror or str(exc))
    finally:
        os.close(fd)


def _size(limit: int) -> str:
    if limit % 2**20 == 0:
        return f"{limit // 2**20} MiB"
    return f"{limit // 2**10} KiB" if limit % 2**10 == 0 else f"{limit} bytes"
