"""A TCP relay that counts what the client sends and says when the client hangs up: what a
test reads to see bytes on the wire (compression) or a connection closed."""

from __future__ import annotations

import asyncio
import contextlib


class CountingRelay:
    """A TCP relay to `port` on 127.0.0.1 that counts the bytes the client sends (`sent`) and
    the connections the client closed (`hangups`), and sets `hung_up` at the first."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.sent = 0
        self.hangups = 0
        self.hung_up = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> int:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    if count:
                        self.sent += len(data)
                    dst.write(data)
                    await dst.drain()
            if count:
                self.hangups += 1
                self.hung_up.set()
            dst.close()

        await asyncio.gather(copy(reader, up_writer, True), copy(up_reader, writer, False))
