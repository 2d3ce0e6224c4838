"""A misbehaving gRPC server written with the `h2` library (server side, on a unix socket): it
answers each call as its current `mode` says, so a test can make a peer hostile and then sane.

Modes: "echo" (a sane server), "gzip_bomb" (an answer a few hundred KiB on the wire that inflates
to `bomb_size`), "ping_flood" / "settings_flood" / "empty_data_flood" (control frames without
end while the call waits), "zero_window" (never lets the request in), "goaway_processed"
(GOAWAY naming the call as begun, then the connection closed), "goaway_unprocessed" (GOAWAY
naming no call as begun when a call arrives, then the connection closed), "goaway_kept_open"
(GOAWAY naming no call as begun, at once and again at every call, and the connection kept open),
"ping_storm" (PINGs without end on the connection, calls never answered: the connection stays
stormy after the mode changes, only new connections see the new mode), "tiny_frames" (an
answer of `answer_size` bytes in 1-byte DATA frames), "black_hole" (reads everything, answers
nothing, not even PINGs), "refused" (every call's stream reset with REFUSED_STREAM as it begins,
counted in `refused`), "refused_once" (the next call's stream refused, then "echo"),
"containerd" (containerd's containers and tasks services, one container: `List` answers every
container in one message, `ListStream` one message per container, `Tasks/List` no task),
"containerd_many" (the same with `containers` records whose OCI spec is `answer_size` bytes),
"containerd_tiny_frames" (those in 1-byte DATA frames).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import zlib
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hyperframe.frame

OK = [(":status", "200"), ("content-type", "application/grpc")]
CHUNK = 2**14
OCI_SPEC = "types.containerd.io/opencontainers/runtime-spec/1/Spec"


def message(payload: bytes, compressed: bool = False) -> bytes:
    return bytes((int(compressed),)) + len(payload).to_bytes(4, "big") + payload


def gzip_of_zeros(size: int) -> bytes:
    """`size` zero bytes, gzip-compressed (about a thousandth of the size)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(2**20)
    parts = [packer.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, packer.flush()])


def tiny_frames(stream: int, payload: bytes | memoryview) -> bytes:
    """`payload` as DATA frames of one byte each on `stream` (9 bytes of header per byte)."""
    count = len(payload)
    frames = bytearray(10 * count)
    frames[2::10] = b"\x01" * count  # the length's low byte; the type and flags stay 0
    for offset, byte in enumerate(stream.to_bytes(4, "big")):
        frames[5 + offset :: 10] = bytes((byte,)) * count
    frames[9::10] = payload
    return bytes(frames)


class HostileServer:
    def __init__(
        self,
        socket: Path,
        mode: str = "echo",
        bomb_size: int = 0,
        answer_size: int = 0,
        containers: int = 1,
    ) -> None:
        self.socket = socket
        self.mode = mode
        self.bomb = gzip_of_zeros(bomb_size) if bomb_size else b""
        self.answer_size = answer_size
        self.containers = containers  # records a containerd mode lists
        self.goaways = 0  # GOAWAY frames sent by "goaway_kept_open"
        self.calls = 0  # calls whose request reached the server
        self.connections = 0
        self.refused = 0  # streams reset with REFUSED_STREAM by "refused" / "refused_once"
        self.frames_sent = 0  # control frames of a flood
        self.called = asyncio.Event()
        self.disconnected = asyncio.Event()  # a client's connection ended
        self._server: asyncio.AbstractServer | None = None
        # Per stream: answer bytes still to send (the client's window was full), then trailers.
        self._pending: dict[int, bytes] = {}
        self._tiny: set[int] = set()  # streams whose answer goes in 1-byte DATA frames
        self._writers: set[asyncio.StreamWriter] = set()
        self._connections: set[asyncio.Task[object]] = set()  # each connection's handler

    @property
    def target(self) -> str:
        return f"unix://{self.socket}"

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket))

    async def stop(self) -> None:
        for writer in list(self._writers):
            writer.close()
        if self._connections:  # each ends at its connection's end
            await asyncio.wait(self._connections, timeout=5)
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        handler = asyncio.current_task()
        if handler is not None:
            self._connections.add(handler)
            handler.add_done_callback(self._connections.discard)
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        conn = h2.connection.H2Connection(config)
        if self.mode == "zero_window":
            conn.local_settings = h2.settings.Settings(
                client=False, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0}
            )
        conn.initiate_connection()
        floods: list[asyncio.Task[None]] = []  # control frames sent beside the exchange
        try:
            writer.write(conn.data_to_send())
            if self.mode == "ping_storm":  # for the life of this connection
                floods.append(asyncio.create_task(self._storm(conn, writer)))
                while data := await reader.read(65536):
                    conn.receive_data(data)  # PING answers and calls alike: left unanswered
                return
            if self.mode == "goaway_kept_open":
                writer.write(self._goaway())
            await self._exchange(conn, reader, writer, floods)
        except (ConnectionError, h2.exceptions.ProtocolError):
            pass
        finally:
            for flood in floods:
                flood.cancel()
            self._writers.discard(writer)
            writer.close()
            self.disconnected.set()

    async def _exchange(
        self,
        conn: h2.connection.H2Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        floods: list[asyncio.Task[None]],
    ) -> None:
        """Reads the client's frames and answers each call as the mode is when it ends."""
        bodies: dict[int, bytes] = {}
        paths: dict[int, str] = {}  # each call's method path
        while data := await reader.read(65536):
            if self.mode == "black_hole":
                continue
            events = conn.receive_data(data)
            begun = any(isinstance(e, h2.events.RequestReceived) for e in events)
            if self.mode == "goaway_unprocessed" and begun:
                # A call arrived; the server goes away without beginning it.
                conn.close_connection(last_stream_id=0)
                writer.write(conn.data_to_send())
                await writer.drain()
                self.mode = "echo"  # the next connection is served
                return
            if self.mode in ("refused", "refused_once") and begun:
                for event in events:
                    if isinstance(event, h2.events.RequestReceived):
                        conn.reset_stream(event.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                        self.refused += 1
                if self.mode == "refused_once":
                    self.mode = "echo"
                writer.write(conn.data_to_send())
                await writer.drain()
                continue
            if self.mode == "goaway_kept_open":
                writer.write(conn.data_to_send())  # its SETTINGS and PING answers
                if begun:
                    writer.write(self._goaway())
                await writer.drain()
                continue
            for event in events:
                if isinstance(event, h2.events.RequestReceived):
                    paths[event.stream_id] = dict(event.headers).get(b":path", b"").decode()
                if isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                elif isinstance(event, h2.events.StreamReset):
                    self._pending.pop(event.stream_id, None)
                elif isinstance(event, h2.events.StreamEnded):
                    self.calls += 1
                    self.called.set()
                    body = bodies.pop(event.stream_id, b"")
                    path = paths.pop(event.stream_id, "")
                    flood = self._answer(conn, event.stream_id, body, writer, path)
                    if flood is not None:
                        floods.append(flood)
            self._flush(conn, writer)
            writer.write(conn.data_to_send())
            await writer.drain()
            if self.mode == "goaway_processed" and self.calls:
                self.mode = "echo"  # the next connection is served
                return

    def _answer(
        self,
        conn: h2.connection.H2Connection,
        stream: int,
        body: bytes,
        writer: asyncio.StreamWriter,
        path: str = "",
    ) -> asyncio.Task[None] | None:
        mode = self.mode
        if mode.startswith("containerd"):
            conn.send_headers(stream, OK)
            self._pending[stream] = self._containerd(path)
            if mode == "containerd_tiny_frames":
                self._tiny.add(stream)
        elif mode == "echo":
            conn.send_headers(stream, OK)
            self._pending[stream] = message(body[5:])  # the request message, echoed
        elif mode == "tiny_frames":
            conn.send_headers(stream, OK)
            self._pending[stream] = message(bytes(self.answer_size))
            self._tiny.add(stream)
        elif mode == "gzip_bomb":
            conn.send_headers(stream, [*OK, ("grpc-encoding", "gzip")])
            self._pending[stream] = message(self.bomb, compressed=True)
        elif mode == "goaway_processed":
            conn.close_connection(last_stream_id=stream)  # this call began: never sent again
        elif mode.endswith("_flood"):
            return asyncio.create_task(self._flood(conn, stream, writer, mode))
        return None

    def _flush(self, conn: h2.connection.H2Connection, writer: asyncio.StreamWriter) -> None:
        """Sends what the client's windows allow of each pending answer, and the trailers of
        those sent whole."""
        for stream, data in list(self._pending.items()):
            view = memoryview(data)
            try:
                while view:
                    window = conn.local_flow_control_window(stream)
                    room = min(window, conn.max_outbound_frame_size)
                    if room <= 0:
                        break
                    if stream in self._tiny:
                        # h2 counts the bytes against the windows as one frame; the wire
                        # carries them one byte per frame instead.
                        writer.write(conn.data_to_send())
                        conn.send_data(stream, bytes(view[:room]))
                        conn.data_to_send()
                        writer.write(tiny_frames(stream, view[:room]))
                    else:
                        conn.send_data(stream, bytes(view[:room]))
                    view = view[room:]
                if not view:
                    conn.send_headers(stream, [("grpc-status", "0")], end_stream=True)
            except h2.exceptions.StreamClosedError:  # the client gave the call up
                view = memoryview(b"")
            if view:
                self._pending[stream] = bytes(view)
            else:
                del self._pending[stream]
                self._tiny.discard(stream)

    def _containerd(self, path: str) -> bytes:
        """The gRPC messages of containerd's answer to `path`."""
        if path.endswith(".Tasks/List"):
            return message(b"")  # ListTasksResponse: no task
        pb: Any = importlib.import_module("otelgpu.processors.container_env._proto.containers_pb2")
        many = self.mode != "containerd"
        spec = bytes(self.answer_size if many else 16)
        records = [
            pb.Container(id=f"{n:064x}", spec={"type_url": OCI_SPEC, "value": spec})
            for n in range(self.containers if many else 1)
        ]
        if path.endswith("/ListStream"):
            return b"".join(
                message(pb.ListContainerMessage(container=r).SerializeToString()) for r in records
            )
        return message(pb.ListContainersResponse(containers=records).SerializeToString())

    def _goaway(self) -> bytes:
        """A GOAWAY that names no stream as begun: every call on the connection may be sent
        again elsewhere."""
        self.goaways += 1
        frame = hyperframe.frame.GoAwayFrame(0)
        frame.last_stream_id = 0
        frame.error_code = h2.errors.ErrorCodes.NO_ERROR
        return bytes(frame.serialize())

    async def _storm(self, conn: h2.connection.H2Connection, writer: asyncio.StreamWriter) -> None:
        """PINGs, 64 at a time, until the connection ends."""
        while not writer.is_closing():
            for _ in range(64):
                conn.ping(self.frames_sent.to_bytes(8, "big"))
                self.frames_sent += 1
            writer.write(conn.data_to_send())
            await writer.drain()
            await asyncio.sleep(0)  # the test's own loop serves the other peers too

    async def _flood(
        self, conn: h2.connection.H2Connection, stream: int, writer: asyncio.StreamWriter, mode: str
    ) -> None:
        conn.send_headers(stream, OK)
        writer.write(conn.data_to_send())
        while self.mode == mode:
            for _ in range(64):
                if mode == "ping_flood":
                    conn.ping(self.frames_sent.to_bytes(8, "big"))
                elif mode == "settings_flood":
                    conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100})
                else:
                    conn.send_data(stream, b"")
                self.frames_sent += 1
            writer.write(conn.data_to_send())
            await writer.drain()
            await asyncio.sleep(0)  # the test's own loop serves the other peers too
        conn.send_data(stream, message(b"after the flood"))
        conn.send_headers(stream, [("grpc-status", "0")], end_stream=True)
        writer.write(conn.data_to_send())
