"""The requests of one HTTP/1.1 connection, parsed from its bytes (`connection.py` answers them).

httptools parses what arrives: a binding of llhttp, Node.js's parser, in C (~3 µs a request;
h11, in Python, takes ~100). llhttp refuses what RFC 9112 calls ambiguous framing:
Content-Length with Transfer-Encoding, two Content-Length fields, a Transfer-Encoding other
than a final `chunked`, bare LF and obsolete line folding; any request it refuses is answered
400 and the connection closed. What llhttp leaves to a server is checked here: one `Host`
field, the size of a head and of a body, and how many requests are parsed ahead of their
answers.
"""

from __future__ import annotations

import asyncio
from collections import deque

import httptools

from otelgpu.confighttp.messages import Request

_MAX_HEAD = 16 * 1024
_MAX_REQUEST_BODY = 64 * 1024
# Requests parsed ahead of their answers (pipelined in one read): after this many the rest of
# the read is dropped and the last answer closes the connection, as RFC 9112 allows a server.
_MAX_QUEUED = 16
# What is read goes to the parser in pieces of this size: a head still incomplete is refused
# once its bytes pass _MAX_HEAD by at most one piece (a request head is one piece or less).
_PIECE = 1024


class _Refused(Exception):
    """Raised in a parser callback: the request is answered `status` and the connection ends."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _LastRequest(Exception):
    """Raised in a parser callback: nothing after this request is parsed."""


class RequestParser:
    """Turns a connection's bytes into `queue`d requests, in order, each with whether the
    connection stays open after its answer. Parsing stops for good (`done`) after a request
    that closes the connection, or at a request it refuses: `refusal` is then the status to
    answer once the requests before it are answered. `deadline` is when the request being
    parsed must be whole (its first byte + `header_timeout`; the loop's clock), None between
    requests."""

    def __init__(self, header_timeout: float) -> None:
        self._header_timeout = header_timeout
        self._parser = httptools.HttpRequestParser(self)
        self.peer = ""  # the client's address and when its connection was accepted: set by
        self.opened = 0.0  # the connection once it is made, copied into every request
        self.queue: deque[tuple[Request, bool]] = deque()  # parsed, not answered; keep-alive
        self.done = False  # nothing more is parsed on this connection
        self.refusal: int | None = None  # sent once the requests before it are answered
        self.in_message = False  # a request has begun and is not whole
        self.deadline: float | None = None
        # the request being parsed
        self._url = bytearray()
        self._headers: list[tuple[bytes, bytes]] = []
        self._request: Request | None = None
        self._head_size = 0  # bytes of its URL and complete header lines
        self._head_pieces = 0  # bytes of pieces read that lay wholly inside its head
        self._body_size = 0
        self._in_head = False
        self._began_in_piece = False

    def feed(self, data: bytes) -> None:
        """Parses what was read, unless parsing is `done`. Raises RuntimeError when a callback
        here failed for any reason but a refusal (a bug)."""
        whole = memoryview(data)
        for start in range(0, len(whole), _PIECE):
            piece = whole[start : start + _PIECE]
            self._began_in_piece = False
            try:
                self._parser.feed_data(piece)
            except httptools.HttpParserCallbackError as error:
                self._stop(error.__context__)
            except httptools.HttpParserUpgrade:  # after an Upgrade or CONNECT request: answered
                self.done = True
            except httptools.HttpParserError:
                self.done, self.refusal = True, 400
            if self.done:
                break
            # llhttp keeps an unfinished header line until its end arrives: a head still
            # incomplete is measured by the pieces that lay wholly inside it.
            if self._in_head and not self._began_in_piece:
                self._head_pieces += len(piece)
                if self._head_pieces > _MAX_HEAD:
                    self.done, self.refusal = True, 431
                    break

    def cut_short(self) -> None:
        """The client ended its side in the middle of a request: it is refused (400)."""
        self.done, self.refusal = True, 400

    def _stop(self, cause: BaseException | None) -> None:
        """Parsing stopped in a callback of ours; anything else it raised is a bug here."""
        self.done = True
        if isinstance(cause, _Refused):
            self.refusal = cause.status
        elif not isinstance(cause, _LastRequest):
            raise RuntimeError("HTTP parser callback failed") from cause

    # --- httptools calls these from `feed_data` -------------------------------------------

    def on_message_begin(self) -> None:
        self._url.clear()
        self._headers = []
        self._head_size = self._head_pieces = self._body_size = 0
        self._in_head = self.in_message = self._began_in_piece = True
        self.deadline = asyncio.get_running_loop().time() + self._header_timeout

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._grow_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._grow_head(len(name) + len(value) + 4)

    def on_headers_complete(self) -> None:
        self._in_head = False
        hosts = sum(1 for name, _ in self._headers if name.lower() == b"host")
        if hosts > 1 or (hosts == 0 and self._parser.get_http_version() == "1.1"):
            raise _Refused(400)  # RFC 9112 section 3.2
        self._request = Request(
            method=self._parser.get_method().decode("ascii", "replace"),
            path=self._url.partition(b"?")[0].decode("ascii", "replace"),
            headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in self._headers},
            peer=self.peer,
            opened=self.opened,
        )

    def on_body(self, body: bytes) -> None:
        self._body_size += len(body)
        if self._body_size > _MAX_REQUEST_BODY:
            raise _Refused(413)

    def on_message_complete(self) -> None:
        self.in_message = False
        self.deadline = None
        request, self._request = self._request, None
        assert request is not None  # the head comes first
        parser = self._parser
        keep_alive = (
            parser.should_keep_alive()
            and parser.get_http_version() == "1.1"  # HTTP/1.0: one request per connection
            and not parser.should_upgrade()  # no protocol but this one is spoken here
            and len(self.queue) + 1 < _MAX_QUEUED
        )
        self.queue.append((request, keep_alive))
        if not keep_alive:
            raise _LastRequest

    def _grow_head(self, size: int) -> None:
        self._head_size += size
        if self._head_size > _MAX_HEAD:
            raise _Refused(431)
