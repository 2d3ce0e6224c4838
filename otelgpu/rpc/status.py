"""gRPC status codes and how a call's outcome is read from its HTTP/2 answer.

The codes and the mappings (HTTP status to gRPC code, HTTP/2 stream error to gRPC code) are the
ones the gRPC over HTTP/2 protocol specifies, so a failure reads the same as it would through
any other gRPC client.
"""

from __future__ import annotations

import base64
import binascii
import enum
import urllib.parse
from collections.abc import Iterable

Metadata = tuple[tuple[str, str | bytes], ...]


class StatusCode(enum.IntEnum):
    """The canonical gRPC status codes (the value is what `grpc-status` carries)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class RpcError(Exception):
    """A call that did not end with OK: its code, the server's message (or ours, when the call
    never reached the server), and the trailing metadata (`-bin` values as bytes)."""

    def __init__(self, code: StatusCode, details: str, trailers: Metadata = ()) -> None:
        self.code = code
        self.details = details
        self.trailers = trailers
        super().__init__(f"{code.name}: {details}" if details else code.name)


# An answer that is not gRPC's 200: the code a gRPC client reports for its HTTP status.
_HTTP_CODES = {
    400: StatusCode.INTERNAL,
    401: StatusCode.UNAUTHENTICATED,
    403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED,
    429: StatusCode.UNAVAILABLE,
    502: StatusCode.UNAVAILABLE,
    503: StatusCode.UNAVAILABLE,
    504: StatusCode.UNAVAILABLE,
}

# RST_STREAM error codes (RFC 9113 section 7) other than INTERNAL's many.
_REFUSED_STREAM, _CANCEL, _ENHANCE_YOUR_CALM, _INADEQUATE_SECURITY = 0x7, 0x8, 0xB, 0xC
_RESET_CODES = {
    _REFUSED_STREAM: StatusCode.UNAVAILABLE,
    _CANCEL: StatusCode.CANCELLED,
    _ENHANCE_YOUR_CALM: StatusCode.RESOURCE_EXHAUSTED,
    _INADEQUATE_SECURITY: StatusCode.PERMISSION_DENIED,
}


def code_of_http_status(status: int) -> StatusCode:
    return _HTTP_CODES.get(status, StatusCode.UNKNOWN)


def code_of_reset(error_code: int) -> StatusCode:
    """The code of a stream the server reset."""
    return _RESET_CODES.get(error_code, StatusCode.INTERNAL)


def refused(error_code: int) -> bool:
    """Whether a reset says the server never began the call (safe to send again)."""
    return error_code == _REFUSED_STREAM


def outcome(headers: Metadata, trailers: Metadata) -> RpcError | None:
    """None when the call ended OK, else its error. `headers` are the answer's headers (with
    `:status`); `trailers` are its trailers, empty for a trailers-only answer, whose status then
    sits in the headers."""
    fields = dict(headers)
    status = fields.get(":status", "")
    if status != "200":
        text = status if isinstance(status, str) else ""
        code = code_of_http_status(int(text)) if text.isdigit() else StatusCode.UNKNOWN
        return RpcError(code, f"the server answered HTTP status {text or '(none)'}", trailers)
    ending = trailers or headers
    status_fields = dict(ending)
    raw = status_fields.get("grpc-status")
    if not isinstance(raw, str) or not raw.isdigit():
        return RpcError(StatusCode.INTERNAL, "the server's answer has no grpc-status", ending)
    value = int(raw)
    if value == StatusCode.OK:
        return None
    try:
        code = StatusCode(value)
    except ValueError:  # a code this side does not know
        code = StatusCode.UNKNOWN
    message = status_fields.get("grpc-message", "")
    details = urllib.parse.unquote(message) if isinstance(message, str) else ""
    return RpcError(code, details, ending)


def decode_metadata(fields: Iterable[tuple[bytes, bytes]]) -> Metadata:
    """HTTP/2 header fields as gRPC metadata: names and text values as str, `-bin` values
    base64-decoded to bytes (the padding is optional on the wire)."""
    decoded: list[tuple[str, str | bytes]] = []
    for raw_name, raw_value in fields:
        name = raw_name.decode("ascii", "replace")
        if name.endswith("-bin"):
            try:
                padding = b"=" * (-len(raw_value) % 4)
                decoded.append((name, base64.b64decode(raw_value + padding, validate=False)))
            except (binascii.Error, ValueError):
                decoded.append((name, b""))
        else:
            decoded.append((name, raw_value.decode("utf-8", "replace")))
    return tuple(decoded)
