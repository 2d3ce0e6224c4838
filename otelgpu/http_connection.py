"""One HTTP/1.1 connection of the agent's endpoints, and what a request and its answer are.

`Connection` is the `asyncio.Protocol` a `Listener` (`otelgpu.http_listener`) makes for each
accepted socket. h11 parses what arrives; a request whose answer is ready at once is answered
inside the `data_received` call that read it, an awaited one (a password check) from a task
while reading pauses. Its bounds (the idle timer, reading paused with writing, 431/413 with a
lingering close, 503 for a called-off check, the send buffer) are listed in the listener's
docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import h11

from otelgpu import http_send_buffer
from otelgpu.log_limits import RateLimitedLog

_MAX_HEAD = 16 * 1024
_MAX_REQUEST_BODY = 64 * 1024
_LINGER = 2.0  # seconds a refused client may go on sending before its connection is reset
_JOIN_LIMIT = 256 * 1024  # bodies up to this go out in one send with their head (one copy)


@dataclass(frozen=True, slots=True)
class Request:
    """One request: method, path (no query), headers (lower-case names), client address."""

    method: str
    path: str
    headers: Mapping[str, str]
    peer: str


@dataclass(frozen=True, slots=True)
class Response:
    """One answer. A `body` over 256 KiB is sent from itself, in slices (at most one slice's
    rest is ever copied); a smaller one is joined to its head, so that it leaves in one send."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()


# A handler answers at once (a Response) or, when it must wait (a password check), with an
# awaitable of one; it runs on the listener's thread and must not block.
Handler = Callable[[Request], Response | Awaitable[Response]]


class Owner(Protocol):
    """What a connection needs of the listener that accepted it."""

    handler: Handler  # read once per request: a reload replaces it whole
    idle_timeout: float
    errors: RateLimitedLog  # a failing handler: a line a minute, not a request

    def opened(self, connection: Connection) -> None: ...

    def closed(self, connection: Connection) -> None: ...


_INTERNAL_ERROR = Response(500, b"internal error\n", (("Content-Type", "text/plain"),))
# A check the handler awaited was called off (its authenticator closed by a reload or a stop).
_CALLED_OFF = Response(
    503, b"reloading, try again\n", (("Content-Type", "text/plain"), ("Retry-After", "1"))
)


class Connection(asyncio.Protocol):
    """One client connection: h11 parses what arrives, each complete request is answered
    inside `data_received` when its handler answers at once, else from a task while reading
    pauses. Pipelined requests are answered in order. One timer closes a connection idle for
    `idle_timeout`: no bytes from the client, or the client not reading the answer (writing
    paused)."""

    def __init__(self, owner: Owner) -> None:
        self._owner = owner
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        self._transport: asyncio.Transport | None = None
        self._peer = ""
        self._request: Request | None = None  # the head of the request whose body is read
        self._received = 0  # bytes of that body
        self.pending: asyncio.Task[None] | None = None  # an answer the handler awaits
        self._writing_paused = False
        self._unsent: deque[memoryview] = deque()  # what is left of a big answer, in order
        self._slice = http_send_buffer.BODY_SLICE
        self._timer: asyncio.TimerHandle | None = None
        self._closing = False

    # --- asyncio's calls ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if transport.get_extra_info("ssl_object") is None:
            # Writing pauses as soon as the kernel leaves anything unsent, and resumes once
            # the transport has sent it all: a big answer's next slice then goes straight to
            # `send`. (Not under TLS: its transport pauses at size >= high, so 0 would never
            # resume, and it copies each slice to encrypt it anyway.)
            transport.set_write_buffer_limits(high=0)
        self._owner.opened(self)
        granted = http_send_buffer.size_send_buffer(transport.get_extra_info("socket"))
        self._slice = http_send_buffer.body_slice(granted)
        peer = transport.get_extra_info("peername")
        self._peer = peer[0] if isinstance(peer, tuple) else ""
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return  # refused or closing: dropped
        self._h11.receive_data(data)
        self._arm()
        self._advance()

    def eof_received(self) -> bool:
        if self._closing:
            return False
        self._h11.receive_data(b"")  # h11 sees the client's close
        self._advance()  # answers what came before it; h11 then says the connection is over
        # Nothing is awaited here: reading pauses while an answer is, so a client that
        # half-closed after its request is only seen to once it has been answered.
        return False

    def pause_writing(self) -> None:
        # No new answer, and nothing more read, until the client reads this one: a client
        # that sends without reading must not grow h11's buffer or keep the timer fresh.
        self._writing_paused = True
        if self.pending is None and self._transport is not None:
            self._transport.pause_reading()
        self._arm()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._feed()
        if self._writing_paused:
            return  # the next slice filled the socket again
        if self.pending is None and self._transport is not None and not self._closing:
            self._transport.resume_reading()
        self._arm()
        self._advance()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._owner.closed(self)
        if self._timer is not None:
            self._timer.cancel()
        if self.pending is not None:
            self.pending.cancel()

    # --- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Closes once what was written is sent."""
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Closes at once, dropping what was not sent."""
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._owner.idle_timeout, self._idle)

    def _idle(self) -> None:
        if self._writing_paused:
            self.abort()  # it does not read what it asked for: drop what is queued
        elif self.pending is not None and not self.pending.done():
            self._arm()  # the handler is still working on an answer (bounded by its own limits)
        else:
            self.close()  # nothing from the client: what the kernel still holds is delivered

    # --- requests -------------------------------------------------------------------------

    def _advance(self) -> None:
        """Answers every complete request h11 holds, in order, until it needs more bytes, an
        answer is awaited, the client stops reading, or the connection ends."""
        self._safely(self._drain)

    def _drain(self) -> None:
        # (`_feed` leaves nothing unsent unless writing paused: no answer overtakes another)
        while not self._closing and self.pending is None and not self._writing_paused:
            if not self._step():
                return

    def _safely(self, work: Callable[[], None]) -> None:
        """Runs `work`; what it raises ends this connection (with a 4xx where the request was
        at fault), never the listener's loop."""
        try:
            work()
        except h11.RemoteProtocolError as error:
            self._refuse(error.error_status_hint)
        except h11.ProtocolError:  # a state h11 refuses to go on from (a bad answer): close
            self.close()
        except Exception:  # a bug here must not take the listener's loop down: drop this one
            self._owner.errors.log(logging.ERROR, "HTTP connection failed", exc_info=True)
            self.abort()

    def _step(self) -> bool:
        """Handles h11's next event; False when there is nothing more to do for now."""
        event = self._h11.next_event()
        if isinstance(event, h11.Request):
            # h11 bounds only a head still incomplete; one read can bring a whole big one
            if _head_size(event) > _MAX_HEAD:
                raise h11.RemoteProtocolError("request head too large", 431)
            self._request = Request(
                method=event.method.decode("ascii", "replace"),
                path=event.target.decode("ascii", "replace").partition("?")[0],
                headers={k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers},
                peer=self._peer,
            )
            self._received = 0
        elif isinstance(event, h11.Data):
            self._received += len(event.data)
            if self._received > _MAX_REQUEST_BODY:
                raise h11.RemoteProtocolError("request body too large", 413)
        elif isinstance(event, h11.EndOfMessage):
            request, self._request = self._request, None
            assert request is not None  # h11 gives the head before the end
            self._answer(request)
        elif event is h11.NEED_DATA or event is h11.PAUSED:
            return False  # more bytes, or our answer first
        else:  # ConnectionClosed
            self.close()
            return False
        return True

    def _answer(self, request: Request) -> None:
        try:
            answer = self._owner.handler(request)
        except Exception:
            answer = self._failed(request)
        if isinstance(answer, Response):
            self._respond(request, answer)
            return
        assert self._transport is not None
        self._transport.pause_reading()  # the answer comes from a task; requests wait
        self.pending = asyncio.ensure_future(self._later(request, answer))

    async def _later(self, request: Request, awaitable: Awaitable[Response]) -> None:
        try:
            response = await awaitable
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this connection is closing
            response = _CALLED_OFF  # the check itself was called off, not this connection
        except Exception:
            response = self._failed(request)
        finally:
            self.pending = None
        if not self._closing:
            self._safely(lambda: self._resume(request, response))

    def _resume(self, request: Request, response: Response) -> None:
        """Sends an awaited answer, then reads and answers what came meanwhile."""
        assert self._transport is not None
        self._respond(request, response)
        if not self._closing:
            if not self._writing_paused:
                self._transport.resume_reading()
            self._drain()

    def _failed(self, request: Request) -> Response:
        """The answer when the handler raised: logged (a line a minute), 500 sent; a handler
        bug must not end the connection loop."""
        self._owner.errors.log(
            logging.ERROR, "answering %s %s failed", request.method, request.path, exc_info=True
        )
        return _INTERNAL_ERROR

    def _respond(self, request: Request, response: Response) -> None:
        assert self._transport is not None
        conn = self._h11
        headers = [*response.headers, ("Content-Length", str(len(response.body)))]
        parts = [conn.send(h11.Response(status_code=response.status, headers=headers)) or b""]
        if response.body and request.method != "HEAD":
            # Passthrough: the body object itself, not a copy (h11 adds nothing with a
            # Content-Length).
            parts += conn.send_with_data_passthrough(h11.Data(data=response.body)) or ()
        parts.append(conn.send(h11.EndOfMessage()) or b"")
        keep_alive = conn.our_state is h11.DONE and conn.their_state is h11.DONE
        if len(response.body) <= _JOIN_LIMIT:
            # One send instead of two: each send releases the GIL, and taking it back while
            # the pipeline computes can cost a switch interval.
            self._transport.write(b"".join(parts))
        elif keep_alive:
            self._unsent.extend(memoryview(part) for part in parts if part)
            self._feed()
        else:  # the transport flushes its buffer before it closes: the whole body goes there
            for part in parts:
                if part:
                    self._transport.write(part)
        if keep_alive:
            conn.start_next_cycle()
            self._arm()
        else:
            self.close()  # Connection: close, HTTP/1.0, ...

    def _feed(self) -> None:
        """Hands the transport the next slices of a big answer until one is not sent whole
        (writing pauses; `resume_writing` calls again once it has left) or all are."""
        assert self._transport is not None
        unsent = self._unsent
        while unsent and not self._writing_paused and not self._closing:
            part = unsent.popleft()
            if len(part) > self._slice:
                unsent.appendleft(part[self._slice :])
                part = part[: self._slice]
            self._transport.write(part)

    def _refuse(self, status: int) -> None:
        """Answers a request h11 could not parse (400, 413, 431, ...) when the state allows,
        then closes the connection."""
        assert self._transport is not None
        conn = self._h11
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            headers = [("Content-Length", "0"), ("Connection", "close")]
            with contextlib.suppress(h11.LocalProtocolError):
                head = conn.send(h11.Response(status_code=status, headers=headers))
                self._transport.write(head or b"")
                self._transport.write(conn.send(h11.EndOfMessage()) or b"")
        if not self._transport.can_write_eof():  # TLS
            self.close()
            return
        # A lingering close: the client may still be sending what was refused, and closing
        # with its bytes unread would reset the connection before it read the answer. So our
        # side ends, what it still sends is read and dropped, for at most _LINGER seconds.
        self._closing = True
        self._transport.write_eof()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(_LINGER, self.abort)


def _head_size(request: h11.Request) -> int:
    """About the bytes of a request head: its request line and header lines."""
    return (
        len(request.method)
        + len(request.target)
        + sum(len(name) + len(value) + 4 for name, value in request.headers)
    )
