"""One HTTP/2 connection to a gRPC peer (the `h2` protocol library on asyncio streams): its
streams, their flow control, and what the peer's frames mean for each call on it."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from otelgpu.rpc.frames import PREFIX, Body, too_big, unary_answer
from otelgpu.rpc.status import (
    Metadata,
    RpcError,
    StatusCode,
    code_of_reset,
    decode_metadata,
    refused,
)

DEFAULT_MAX_RECEIVE = 4 * 2**20  # gRPC's default limit on one answer
# Our receive windows: an answer of a few MiB (containerd's List carries every OCI spec) should
# not stop for a window update every 64 KiB, the protocol's default.
_WINDOW = 4 * 2**20
_READ_SIZE = 2**18
# DATA frames of at most 32 KiB: with the image's MALLOC_MMAP_THRESHOLD_ (128 KiB), bigger
# frames and the socket buffer behind them are fresh mmapped pages on every send (a 4.7 MB
# request: 4.9 ms of CPU at 32 KiB, 6.5 at 64 KiB, 19.7 in the peer's 4 MiB frames).
_CHUNK = 2**15
_CLOSE_WAIT = 0.5  # seconds
_REDIAL_PAUSES = (0.02, 0.05, 0.1)  # seconds between dials a unix socket refused


@dataclass(frozen=True, slots=True)
class Address:
    """Where the peer listens: a unix socket path, or a host and port (TLS when `tls` is set;
    `server_hostname` is the name its certificate is checked against)."""

    path: str = ""
    host: str = ""
    port: int = 0
    tls: ssl.SSLContext | None = None
    server_hostname: str = ""

    def __str__(self) -> str:
        return f"unix://{self.path}" if self.path else f"{self.host}:{self.port}"


class Refused(Exception):
    """The server never began the call (it may be sent again)."""


@dataclass(slots=True)
class _Stream:
    headers: Metadata = ()
    trailers: Metadata = ()
    data: list[bytes] = field(default_factory=list)
    received: int = 0
    limit: int = DEFAULT_MAX_RECEIVE
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    error: Exception | None = None


class Connection:
    """One HTTP/2 connection: a reader task turns the peer's frames into stream outcomes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str):
        self._reader, self._writer, self._target = reader, writer, target
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self._h2 = h2.connection.H2Connection(config=config)
        self._streams: dict[int, _Stream] = {}
        self._window_open = asyncio.Event()
        self._lost: str = ""
        self._going_away = False
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def dial(cls, address: Address) -> Connection:
        for pause in (*_REDIAL_PAUSES, None):
            try:
                reader, writer = await _open(address)
                break
            except ConnectionRefusedError as exc:
                # A unix socket's file exists a moment before its daemon listens on it (a
                # containerd or kubelet starting up): such a refusal is tried again, briefly.
                if pause is None or not address.path:
                    raise _unreachable(address, exc) from None
                await asyncio.sleep(pause)
            except (OSError, ssl.SSLError) as exc:
                raise _unreachable(address, exc) from None
        tls = writer.get_extra_info("ssl_object")
        if address.tls is not None and (tls is None or tls.selected_alpn_protocol() != "h2"):
            writer.close()
            raise RpcError(
                StatusCode.UNAVAILABLE, f"{address} did not agree to HTTP/2 (ALPN h2) over TLS"
            )
        connection = cls(reader, writer, str(address))
        connection._start()
        return connection

    @property
    def usable(self) -> bool:
        return not self._lost and not self._going_away

    @property
    def idle(self) -> bool:
        return not self._streams

    def _start(self) -> None:
        self._h2.local_settings = h2.settings.Settings(
            client=True,
            initial_values={
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: _WINDOW,
            },
        )
        self._h2.initiate_connection()
        self._h2.increment_flow_control_window(_WINDOW)
        self._flush()
        self._task = asyncio.create_task(self._read(), name=f"grpc reader {self._target}")

    async def call(self, headers: list[tuple[str, str]], body: Body, max_receive: int) -> bytes:
        if not self.usable:
            raise Refused(f"the connection to {self._target} is closing")
        stream_id = self._h2.get_next_available_stream_id()
        stream = self._streams[stream_id] = _Stream(limit=max_receive)
        try:
            self._h2.send_headers(stream_id, headers)  # written with the first DATA frame:
            await self._send(stream_id, stream, body)  # one send for a small call
            await stream.ended.wait()
        except (h2.exceptions.ProtocolError, OSError) as exc:
            # The connection's state is in doubt (stream IDs used up, a broken socket): the
            # next call dials a new one.
            self._lost = self._lost or repr(exc)
            if stream.error is None:
                stream.error = RpcError(StatusCode.UNAVAILABLE, f"{self._target}: {exc!r}")
        except asyncio.CancelledError:  # the deadline passed, or the caller gave up
            self._cancel(stream_id)
            raise
        finally:
            self._streams.pop(stream_id, None)
            if not self.usable and self.idle:
                self._writer.close()  # a connection going away, done with: its reader ends
        if stream.error is not None:
            raise stream.error
        return unary_answer(stream.headers, stream.trailers, stream.data, max_receive)

    async def _send(self, stream_id: int, stream: _Stream, body: Body) -> None:
        """The body in DATA frames as the peer's flow-control windows allow. Frames are kept
        small (`_CHUNK`): each one is copied a few times on its way (h2, the socket buffer), and
        small copies stay in the allocator's reused memory instead of fresh pages."""
        sent = 0
        while sent < body.size and stream.error is None and not stream.ended.is_set():
            size = min(self._h2.local_flow_control_window(stream_id), body.size - sent)
            size = min(size, self._h2.max_outbound_frame_size, _CHUNK)
            if size <= 0:
                self._window_open.clear()
                await self._window_open.wait()
                continue
            end = sent + size == body.size
            self._h2.send_data(stream_id, body.part(sent, size), end_stream=end)
            sent += size
            self._flush()
            await self._writer.drain()

    async def _read(self) -> None:
        reason = "the server closed the connection"
        try:
            while data := await self._reader.read(_READ_SIZE):
                for event in self._h2.receive_data(data):
                    self._on(event)
                self._flush()
        except Exception as exc:  # a broken socket or a peer breaking HTTP/2: the calls fail
            reason = f"the connection broke: {exc!r}"
        finally:
            self._close_all(reason)

    def _on(self, event: h2.events.Event) -> None:
        stream = self._streams.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.DataReceived):
            # Acknowledged even for a stream given up: the connection's window must refill.
            self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if stream is not None and not stream.ended.is_set():
                self._receive(event.stream_id, stream, event.data)
        elif isinstance(event, h2.events.ResponseReceived) and stream is not None:
            stream.headers = decode_metadata(event.headers)
        elif isinstance(event, h2.events.TrailersReceived) and stream is not None:
            stream.trailers = decode_metadata(event.headers)
        elif isinstance(event, h2.events.StreamEnded) and stream is not None:
            stream.ended.set()
        elif isinstance(event, h2.events.StreamReset) and stream is not None:
            if not stream.ended.is_set():  # a reset after a whole answer changes nothing
                self._fail(stream, event.error_code, "the server reset the call")
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._window_open.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._going_away = True
            last = event.last_stream_id if event.last_stream_id is not None else 2**31
            for stream_id, waiting in list(self._streams.items()):
                if stream_id > last:  # never begun by the server: may be sent again
                    waiting.error = Refused(f"{self._target} is going away (GOAWAY)")
                    waiting.ended.set()

    def _receive(self, stream_id: int, stream: _Stream, data: bytes) -> None:
        stream.data.append(data)
        stream.received += len(data)
        if stream.received > stream.limit + PREFIX:  # refused as it comes, not once buffered
            declared = int.from_bytes(b"".join(stream.data)[1:PREFIX], "big")
            stream.error = too_big(declared, stream.limit)
            stream.data.clear()
            stream.ended.set()
            self._cancel(stream_id)

    def _fail(self, stream: _Stream, error_code: int, why: str) -> None:
        if refused(error_code):
            stream.error = Refused(f"{self._target} refused the call")
        else:
            stream.error = RpcError(code_of_reset(error_code), f"{why} (HTTP/2 error {error_code})")
        stream.ended.set()
        self._window_open.set()

    def _cancel(self, stream_id: int) -> None:
        """Tells the server the call is abandoned (RST_STREAM CANCEL), if the stream is open."""
        with contextlib.suppress(h2.exceptions.ProtocolError, OSError):
            self._h2.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.CANCEL)
            self._flush()

    def _close_all(self, reason: str) -> None:
        self._lost = reason
        for stream in self._streams.values():
            if not stream.ended.is_set():
                stream.error = RpcError(StatusCode.UNAVAILABLE, f"{self._target}: {reason}")
                stream.ended.set()
        self._window_open.set()

    def _flush(self) -> None:
        data = self._h2.data_to_send()
        if data and not self._writer.is_closing():
            self._writer.write(data)

    async def close(self) -> None:
        self._close_all("the channel was closed")
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(h2.exceptions.ProtocolError, OSError):
            self._h2.close_connection()
            self._flush()
        self._writer.close()
        try:
            # A TLS close waits for the peer's close_notify, which some servers never send.
            async with asyncio.timeout(_CLOSE_WAIT):
                await self._writer.wait_closed()
        except (TimeoutError, OSError, ssl.SSLError):
            self._writer.transport.abort()


async def _open(address: Address) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if address.path:
        return await asyncio.open_unix_connection(address.path)
    return await asyncio.open_connection(
        address.host,
        address.port,
        ssl=address.tls,
        server_hostname=(address.server_hostname or address.host) if address.tls else None,
    )


def _unreachable(address: Address, exc: BaseException) -> RpcError:
    return RpcError(StatusCode.UNAVAILABLE, f"cannot connect to {address}: {exc}")
