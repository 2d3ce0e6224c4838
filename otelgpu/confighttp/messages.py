"""What a request and its answer are on the agent's HTTP endpoints, and an answer's head.

A `Handler` takes a `Request` and gives a `Response`, at once or, when it must wait (a password
check), as an awaitable of one. `head` writes an answer's status line and header fields;
each field is checked once per header set, so no handler's header can split an answer.
"""

from __future__ import annotations

import functools
import http
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Request:
    """One request: method, path (no query), headers (lower-case names), client address, and
    when its connection was accepted (the listener loop's `time()`; with `peer` it tells one
    connection from another, and which came first)."""

    method: str
    path: str
    headers: Mapping[str, str]
    peer: str
    opened: float = 0.0


@dataclass(frozen=True, slots=True)
class Response:
    """One answer. Its head leaves with the body's first 128 KiB (one copy of at most that);
    the rest is sent from the body object itself, in slices.

    `establishes`: whether a success (status below 400) makes its connection an established
    one, which no newcomer evicts at the connection cap (`listener.py`). False for answers
    anyone gets where others need a password (`/health` beside a `/metrics` behind basic
    auth), so that a flood cannot pin the slots a scraper needs."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    establishes: bool = True


# A handler answers at once (a Response) or, when it must wait (a password check), with an
# awaitable of one; it runs on the listener's thread and must not block.
Handler = Callable[[Request], Response | Awaitable[Response]]


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")


def head(status: int, headers: tuple[tuple[str, str], ...], length: int, keep_alive: bool) -> bytes:
    """An answer's status line and header fields, Content-Length last."""
    return b"%sContent-Length: %d\r\n\r\n" % (_fields(status, headers, keep_alive), length)


@functools.lru_cache(maxsize=64)
def _fields(status: int, headers: tuple[tuple[str, str], ...], keep_alive: bool) -> bytes:
    """The status line and the handler's header fields. Handlers answer with a few fixed
    header sets, so each is built, and checked (no field can split the answer), once."""
    if not 100 <= status <= 999:
        raise ValueError(f"status {status} is not a 3-digit HTTP status")
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {status} {reason}\r\n"]
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise ValueError(f"header {name!r} cannot be sent as it is")
        lines.append(f"{name}: {value}\r\n")
    if not keep_alive:
        lines.append("Connection: close\r\n")
    return "".join(lines).encode("latin-1")
