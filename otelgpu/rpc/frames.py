"""gRPC's length-prefixed messages: a request as the parts of one message, an answer's one
message read back (checked, decompressed, held to the caller's limit)."""

from __future__ import annotations

from otelgpu.compression import gunzip_bytes, gzip_bytes
from otelgpu.rpc.status import Metadata, RpcError, StatusCode, outcome

PREFIX = 5  # compressed flag (1 byte) + length (4 bytes, big-endian)
GZIP_LEVEL = 6  # zlib's default, as gRPC runtimes compress (ISA-L caps it at its level 3)


class Body:
    """One gRPC length-prefixed message, read in parts without joining prefix and message (a
    copy of the whole request)."""

    def __init__(self, message: bytes, compress: bool) -> None:
        self._message = memoryview(gzip_bytes(message, GZIP_LEVEL) if compress else message)
        self._prefix = bytes((1 if compress else 0,)) + len(self._message).to_bytes(4, "big")
        self.size = PREFIX + len(self._message)

    def part(self, start: int, size: int) -> bytes | memoryview:
        if start >= PREFIX:
            return self._message[start - PREFIX : start - PREFIX + size]
        return self._prefix[start:] + self._message[: size - (PREFIX - start)].tobytes()


def unary_answer(
    headers: Metadata, trailers: Metadata, data: list[bytes], max_receive: int
) -> bytes:
    """The one message of a finished unary answer, checked and decompressed; raises the
    call's `RpcError` when it did not end OK or its message is malformed."""
    error = outcome(headers, trailers)
    if error is not None:
        raise error
    joined = b"".join(data)
    if len(joined) < PREFIX:
        raise RpcError(StatusCode.INTERNAL, "the server ended the call without an answer")
    flag, length = joined[0], int.from_bytes(joined[1:PREFIX], "big")
    if length > max_receive:
        raise too_big(length, max_receive)
    if len(joined) != PREFIX + length:
        raise RpcError(StatusCode.INTERNAL, "a unary answer must hold exactly one message")
    payload = joined[PREFIX:]
    if flag == 0:
        return payload
    encoding = dict(headers).get("grpc-encoding", "identity")
    if flag != 1 or encoding != "gzip":
        raise RpcError(StatusCode.INTERNAL, f"an answer compressed with {encoding!r}")
    try:
        message = gunzip_bytes(payload)
    except Exception as exc:  # a corrupt stream: zlib.error, or isal's
        raise RpcError(StatusCode.INTERNAL, f"an undecodable gzip answer: {exc}") from None
    if len(message) > max_receive:
        raise too_big(len(message), max_receive)
    return message


def too_big(size: int, limit: int) -> RpcError:
    """The error of an answer over the caller's limit (as gRPC runtimes report it)."""
    return RpcError(
        StatusCode.RESOURCE_EXHAUSTED,
        f"the answer is {size} bytes, more than the limit of {limit} (max receive size)",
    )
