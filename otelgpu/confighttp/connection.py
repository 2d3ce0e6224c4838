"""One HTTP/1.1 connection of the agent's endpoints (requests and answers: `messages.py`).

`Connection` is the `asyncio.Protocol` a `Listener` (`otelgpu.confighttp.listener`) makes for each
accepted socket. What arrives is parsed by its `RequestParser` (`request_parser.py`: httptools,
and the limits on a request), and answered here.

A request whose answer is ready at once is answered in the `data_received` call that read it;
one the handler must await (a password check) from a task while reading pauses. Every answer
leaves through one path: its head with the first slice of its body, then slices of the body
object itself (`otelgpu.confighttp.send_buffer`), the next once the one before is in the kernel.
The listener's docstring lists the bounds.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from otelgpu.component.log_limits import RateLimitedLog
from otelgpu.confighttp import messages, send_buffer
from otelgpu.confighttp.messages import Handler, Request, Response
from otelgpu.confighttp.request_parser import RequestParser
from otelgpu.confighttp.send_buffer import BODY_SLICE

_LINGER = 2.0  # seconds a refused client may go on sending before its connection is reset


class Owner(Protocol):
    """What a connection needs of the listener that accepted it."""

    handler: Handler  # read once per request: a reload replaces it whole
    ssl_context: ssl.SSLContext | None  # the handshake runs once the connection is counted
    idle_timeout: float
    write_timeout: float
    handshake_timeout: float
    header_timeout: float
    errors: RateLimitedLog  # a failing handler: a line a minute, not a request

    def opened(self, connection: Connection) -> bool:
        """Counts a new connection; False when it may not stay (the cap is reached)."""

    def established(self, connection: Connection) -> None:
        """The connection was answered a success (`Response.establishes`)."""

    def closed(self, connection: Connection) -> None: ...


_INTERNAL_ERROR = Response(500, b"internal error\n", (("Content-Type", "text/plain"),))
# A check the handler awaited was called off (its authenticator closed by a reload or a stop).
_CALLED_OFF = Response(
    503, b"reloading, try again\n", (("Content-Type", "text/plain"), ("Retry-After", "1"))
)


class Connection(asyncio.Protocol):
    """One client connection. Requests are answered in order; reading pauses while an answer
    is awaited or the client does not take what was written. One timer: `idle_timeout` while
    no answer is being written (before the first request, between two, while one is awaited),
    cut short by `header_timeout` from a request's first byte until it is whole, and
    `write_timeout` from when an answer starts until all of it is in the kernel."""

    def __init__(self, owner: Owner) -> None:
        self._owner = owner
        self._requests = RequestParser(owner.header_timeout)
        self._transport: asyncio.Transport | None = None  # the TCP one until a TLS handshake
        self._socket: send_buffer.Sockopts | None = None
        self._established = False  # answered a success (`Owner.established`)
        # answering
        self.handshake: asyncio.Task[None] | None = None  # a TLS handshake in progress
        self._early: list[bytes] = []  # what TLS delivered before the handshake task resumed
        self.pending: asyncio.Task[None] | None = None  # an answer the handler awaits
        self._unsent: deque[memoryview] = deque()  # what is left of the answer being written
        self._close_when_sent = False
        self._writing_paused = False
        self._timer: asyncio.TimerHandle | None = None
        self._write_deadline: float | None = None
        self._closing = False
        self._resuming = False  # inside the transport's resume_writing call (see `close`)

    # --- asyncio's calls ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._socket = transport.get_extra_info("socket")
        send_buffer.size_send_buffer(self._socket)
        peer = transport.get_extra_info("peername")
        self._requests.peer = peer[0] if isinstance(peer, tuple) else ""
        self._requests.opened = asyncio.get_running_loop().time()
        if not self._owner.opened(self):  # counted from the accept, a TLS handshake included
            self._closing = True  # the cap is reached and every connection is established
            send_buffer.reset_on_close(self._socket)
            transport.abort()
            return
        if self._owner.ssl_context is None:
            # Writing pauses as soon as the kernel leaves anything unsent, and resumes once
            # the transport has sent it all: the next slice then goes straight to `send`.
            # (Not under TLS: its transport pauses at size >= high, so 0 would never resume.)
            transport.set_write_buffer_limits(high=0)
            self._arm()
        else:
            # Nothing is read until TLS takes the socket over: the task starts on a later turn
            # of the loop, and the client's hello must not reach the HTTP parser before it.
            transport.pause_reading()
            self.handshake = asyncio.ensure_future(self._handshake(transport))

    async def _handshake(self, tcp: asyncio.Transport) -> None:
        context = self._owner.ssl_context
        assert context is not None
        loop = asyncio.get_running_loop()
        tls: asyncio.Transport | None = None
        try:
            tls = await loop.start_tls(
                tcp,
                self,
                context,
                server_side=True,
                ssl_handshake_timeout=self._owner.handshake_timeout,
            )
        except OSError:
            pass  # refused, timed out (ConnectionAbortedError), or the client left: closed
        finally:
            self.handshake = None
            # None: the connection was lost during the handshake. asyncio tells the protocol
            # only in some of these cases, so the connection ends here in all of them.
            if tls is None or self._closing:
                if tls is not None:
                    tls.abort()
                self.connection_lost(None)
        if tls is not None and not self._closing:
            self._transport = tls
            self._arm()
            early, self._early = self._early, []
            for data in early:
                self.data_received(data)

    def data_received(self, data: bytes) -> None:
        if self.handshake is not None:
            # TLS hands over what came with the end of the handshake before `start_tls`
            # returns the transport to answer on: kept for then (one read at most).
            self._early.append(data)
            return
        if self._closing or self._requests.done:
            return  # refused, closing, or past the last request: dropped
        self._safely(lambda: self._parse(data))
        if not self._closing:
            # The timer for what this read left: a request not whole yet (its deadline), an
            # answer awaited (idle: the header deadline ended with the request) or written
            self._arm()

    def eof_received(self) -> bool:
        # Reading pauses while any answer is owed, so the client's end arrives once what it
        # asked before is answered; only a request it cut short is left, and gets 400.
        if not self._closing and not self._requests.done and self._requests.in_message:
            self._requests.cut_short()
            self._safely(self._advance)
        return False  # the transport closes once what was written is sent

    def pause_writing(self) -> None:
        # No new answer, and nothing more read, until the client reads this one: a client
        # that sends without reading must not grow the parser's queue.
        self._writing_paused = True
        self._update_reading()
        self._arm()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._resuming = True
        try:
            self._safely(self._feed)
            if not self._writing_paused:
                self._safely(self._advance)
        finally:
            self._resuming = False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._owner.closed(self)
        if self._timer is not None:
            self._timer.cancel()
        for task in (self.pending, self.handshake):
            if task is not None:
                task.cancel()

    # --- closing --------------------------------------------------------------------------

    # asyncio's socket transport calls `resume_writing` from its write-ready callback, and when
    # that callback finds its buffer empty and the transport closing, it ends the connection
    # itself, after `close`/`abort` already scheduled the same end: the second run raises
    # inside asyncio (an "Exception in callback _call_connection_lost" traceback in the log,
    # CPython 3.11 and 3.12). That happens whenever the last slice of an answer that closes
    # the connection leaves whole from `resume_writing`. So a close asked from inside it is
    # made on the loop's next turn, once the transport's callback has returned.

    def close(self) -> None:
        """Closes once what was written is sent."""
        self._closing = True
        if self._transport is not None:
            self._later_if_resuming(self._transport.close)

    def abort(self) -> None:
        """Closes at once, dropping what was not sent, the kernel's queue included."""
        self._closing = True
        send_buffer.reset_on_close(self._socket)
        if self._transport is not None:
            self._later_if_resuming(self._transport.abort)
        if self.handshake is not None:
            self.handshake.cancel()

    def _later_if_resuming(self, end: Callable[[], None]) -> None:
        if self._resuming:
            asyncio.get_running_loop().call_soon(end)
        else:
            end()

    def _arm(self) -> None:
        """(Re)starts the timer for what the connection does now (see the class docstring)."""
        loop = asyncio.get_running_loop()
        if self._writing_paused or self._unsent:
            if self._write_deadline is None:  # the answer's deadline: progress does not move it
                self._write_deadline = loop.time() + self._owner.write_timeout
                self._set_timer(self._write_deadline, self.abort)
            return
        self._write_deadline = None
        idle = loop.time() + self._owner.idle_timeout
        deadline = self._requests.deadline
        if deadline is not None and deadline < idle:
            self._set_timer(deadline, self.abort)  # a slowloris: dropped
        else:
            self._set_timer(idle, self._idle)

    def _set_timer(self, when: float, callback: Callable[[], None]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, callback)

    def _idle(self) -> None:
        if self.pending is not None:
            self._arm()  # the handler still works on an answer (bounded by its own limits)
        elif send_buffer.kernel_unsent(self._socket):
            self.abort()  # the client has not read the last answer in all that time
        else:
            self.close()

    # --- requests -------------------------------------------------------------------------

    def _parse(self, data: bytes) -> None:
        self._requests.feed(data)
        self._advance()

    def _advance(self) -> None:
        """Answers the requests parsed, in order, until one is awaited or the client stops
        reading; then sends the refusal that ended parsing, if any."""
        requests = self._requests
        while requests.queue and self._ready():
            request, keep_alive = requests.queue.popleft()
            self._answer(request, keep_alive)
        if requests.refusal is not None and self._ready():
            self._refuse(requests.refusal)
        self._update_reading()

    def _ready(self) -> bool:
        return not self._closing and self.pending is None and not self._writing_paused

    def _update_reading(self) -> None:
        if self._closing or self._transport is None:
            return
        if self.pending is not None or self._writing_paused:
            self._transport.pause_reading()
        else:
            self._transport.resume_reading()

    def _answer(self, request: Request, keep_alive: bool) -> None:
        try:
            answer = self._owner.handler(request)
        except Exception:
            answer = self._failed(request)
        if isinstance(answer, Response):
            self._respond(request, answer, keep_alive)
        else:
            self.pending = asyncio.ensure_future(self._later(request, answer, keep_alive))

    async def _later(
        self, request: Request, awaitable: Awaitable[Response], keep_alive: bool
    ) -> None:
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
            self._safely(lambda: self._respond(request, response, keep_alive))
            self._safely(self._advance)

    def _failed(self, request: Request) -> Response:
        """The answer when the handler raised: logged (a line a minute), 500 sent; a handler
        bug must not end the connection loop."""
        self._owner.errors.log(
            logging.ERROR, "answering %s %s failed", request.method, request.path, exc_info=True
        )
        return _INTERNAL_ERROR

    def _safely(self, work: Callable[[], None]) -> None:
        """Runs `work`; what it raises ends this connection, never the listener's loop."""
        try:
            work()
        except Exception:  # a bug here (or an answer that cannot be sent): drop this one
            self._owner.errors.log(logging.ERROR, "HTTP connection failed", exc_info=True)
            self.abort()

    # --- writing --------------------------------------------------------------------------

    def _respond(self, request: Request, response: Response, keep_alive: bool) -> None:
        if not self._established and response.status < 400 and response.establishes:
            self._established = True
            self._owner.established(self)
        body = b"" if request.method == "HEAD" else response.body
        head = messages.head(response.status, response.headers, len(response.body), keep_alive)
        whole = memoryview(body)
        self._unsent.append(memoryview(b"".join((head, whole[:BODY_SLICE]))))
        if len(body) > BODY_SLICE:
            self._unsent.append(whole[BODY_SLICE:])
        self._close_when_sent = not keep_alive
        self._feed()

    def _refuse(self, status: int) -> None:
        """Answers a request that could not be parsed or is refused (400, 413, 431), then ends
        the connection with a lingering close."""
        assert self._transport is not None
        self._requests.refusal = None
        self._unsent.append(memoryview(messages.head(status, (), 0, keep_alive=False)))
        self._feed()
        if not self._transport.can_write_eof():  # TLS
            self.close()
            return
        # A lingering close: the client may still be sending what was refused, and closing
        # with its bytes unread would reset the connection before it read the answer. So our
        # side ends, what it still sends is read and dropped, for at most _LINGER seconds.
        self._closing = True
        self._transport.write_eof()
        self._transport.resume_reading()
        self._set_timer(asyncio.get_running_loop().time() + _LINGER, self.abort)

    def _feed(self) -> None:
        """Hands the transport the next slices of the answer until one is not sent whole
        (writing pauses; `resume_writing` calls again once it has left) or all are; closes
        after the last one when the answer said so."""
        assert self._transport is not None
        unsent = self._unsent
        while unsent and not self._writing_paused and not self._closing:
            part = unsent.popleft()
            if len(part) > BODY_SLICE:
                unsent.appendleft(part[BODY_SLICE:])
                part = part[:BODY_SLICE]
            self._transport.write(part)
        if self._closing:
            return
        if not unsent and self._close_when_sent:
            self.close()  # the transport sends what it holds first
        self._arm()
