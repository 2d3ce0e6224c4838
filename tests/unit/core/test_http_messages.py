"""An answer's head as the endpoints write it (otelgpu/confighttp/messages.py)."""

from __future__ import annotations

import re

import pytest

from otelgpu.confighttp.messages import head


def test_a_head_has_the_status_line_the_fields_and_the_length_last() -> None:
    written = head(200, (("Content-Type", "text/plain"),), 12, keep_alive=True)
    assert written == b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\n"


def test_a_last_answer_says_the_connection_closes() -> None:
    written = head(503, (), 0, keep_alive=False)
    assert written == (
        b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )


def test_a_status_without_a_reason_phrase_has_an_empty_one() -> None:
    assert head(599, (), 0, keep_alive=True).startswith(b"HTTP/1.1 599 \r\n")


@pytest.mark.parametrize("status", [99, 1000])
def test_a_status_that_is_not_three_digits_is_refused(status: int) -> None:
    with pytest.raises(ValueError, match=f"status {status} is not a 3-digit HTTP status"):
        head(status, (), 0, keep_alive=True)


@pytest.mark.parametrize(
    "field", [("X-Bad\r\nSet-Cookie", "a"), ("X-Split", "a\r\nSet-Cookie: b"), ("", "a")]
)
def test_a_field_that_could_split_the_answer_is_refused_by_name(field: tuple[str, str]) -> None:
    message = f"header {field[0]!r} cannot be sent as it is"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        head(200, (field,), 0, keep_alive=True)
