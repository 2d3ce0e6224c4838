"""Bytes to an HTTP endpoint and everything it answers until it closes: for requests no HTTP
client library would send (pipelined, garbage, half-closed)."""

from __future__ import annotations

import socket


def raw(port: int, request: bytes, *, timeout: float = 5.0, half_close: bool = False) -> bytes:
    """Sends `request` to 127.0.0.1:`port` (then shuts down writing when `half_close`) and
    reads until the server closes (blocking: call it from a thread in async tests)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)
