"""A TCP relay in front of a real peer that counts the connections it carried: a test that must
see a client try N times waits on the count, not on a clock."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

from tests.peers.ports import free_port


class TcpRelay:
    """Listens on a loopback port and pipes every connection to `upstream_port`, both ways."""

    def __init__(self, upstream_port: int) -> None:
        self.port = free_port()
        self._upstream = upstream_port
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._count = 0
        self._counted = threading.Condition()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        with self._counted:
            return self._count

    def wait_for_connections(self, count: int, timeout: float = 30.0) -> None:
        """Returns once `count` connections came in; fails if they do not within `timeout`."""
        with self._counted:
            came = self._counted.wait_for(lambda: self._count >= count, timeout)
            assert came, f"{self._count} of {count} connections within {timeout} s"

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._counted:
                self._count += 1
                self._counted.notify_all()
            try:
                upstream = socket.create_connection(("127.0.0.1", self._upstream), timeout=5)
            except OSError:
                client.close()
                continue
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def tcp_relay(upstream_port: int) -> Iterator[TcpRelay]:
    relay = TcpRelay(upstream_port)
    try:
        yield relay
    finally:
        relay.close()
