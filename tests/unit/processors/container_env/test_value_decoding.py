"""What the value rules decode before they look: wrapped base64, zlib and gzip, the share of
printable text, key material without its header, and the reading bound counted once per
distinct reading."""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable

import pytest

from otelgpu.processors.container_env.values import credential_kind

PAIR = "password=hunter2x"


def b64(raw: str | bytes) -> str:
    return base64.b64encode(raw.encode() if isinstance(raw, str) else raw).decode()


@pytest.mark.parametrize(
    ("text", "encoded", "kind"),
    [
        ("password=hunter2xyz", "cGFzc3dvcm\nQ9aHVudGVy\nMnh5eg==", "credential_pair"),
        ("postgres://app:hunter2@db/x", "cG9zdGdyZXM6 Ly9hcHA6aHVu dGVyMkBkYi94", "credential_url"),
    ],
)
def test_base64_wrapped_in_short_lines_is_joined_and_read(
    text: str, encoded: str, kind: str
) -> None:
    # each line is under the 16 characters a base64 run needs: only the join shows the pair
    assert "".join(encoded.split()) == b64(text)
    assert credential_kind(encoded) == kind


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_zlib_is_inflated_whatever_its_level(level: int) -> None:
    # the header's second byte differs per level (78 01, 78 5e, 78 9c, 78 da): each is a
    # multiple of 31 with the first, which is all the header check may ask
    assert credential_kind(b64(zlib.compress(PAIR.encode(), level))) == "credential_pair"


@pytest.mark.parametrize("value", ["a B", "u C", "2 A", "eF 4"])
def test_a_decoding_of_one_or_two_bytes_is_read_without_error(value: str) -> None:
    # `a B` joins to `aB`: one byte, 0x68, whose low half names deflate; `eF 4` decodes to
    # `x^`, a zlib header with no stream after it
    assert credential_kind(value) is None


def test_text_of_short_lines_is_printable() -> None:
    # newlines, tabs and carriage returns are text: a short env file is read whole
    env = "A=1\r\nB=2\r\n\tpassword=hunter2\n"
    assert credential_kind(b64(env)) == "credential_pair"


def test_decoded_bytes_are_text_when_nine_in_ten_are_printable() -> None:
    exactly_nine_tenths = b"password=hunter2xy\x01\x02"  # 18 of 20 printable
    assert credential_kind(b64(exactly_nine_tenths)) == "credential_pair"
    under = b"password=hunter2x\x01\x02\x03"  # 17 of 20: not text, not read as such
    assert credential_kind(b64(under)) != "credential_pair"


OPENSSH_BODY = b"openssh-key-v1\x00" + b"\x00\x00\x00\x04none" * 4 + bytes(range(40))


def _wrapped_inside_the_magic(raw: bytes) -> str:
    text = b64(raw)
    return text[:8] + "\n" + text[8:]  # the OpenSSH marker's base64 cut in two


@pytest.mark.parametrize("encode", [bytes.hex, _wrapped_inside_the_magic])
def test_an_openssh_key_body_is_key_material_however_encoded(
    encode: Callable[[bytes], str],
) -> None:
    # in hex, or in base64 wrapped inside its first bytes, the text shows no PEM marker:
    # only the decoded bytes do
    value = encode(OPENSSH_BODY)
    assert "b3BlbnNzaC1rZXktdjE" not in value
    assert credential_kind(value) == "pem"


def test_der_with_four_length_bytes_is_no_key() -> None:
    # a SEQUENCE claiming 2^24 bytes or more is no key or certificate (those are far
    # smaller); three length bytes are still read
    body = b"\x02\x01\x00" + bytes(40)
    four = b"\x30\x84\x00\x00\x00\x2b" + body
    three = b"\x30\x83\x00\x00\x2b" + body
    assert credential_kind(three.hex()) == "pem"
    assert credential_kind(four.hex()) is None


def test_a_key_whose_length_takes_one_long_form_byte_is_key_material() -> None:
    # PKCS#8 of a P-256 key: `30 81 87`, 135 bytes after the length byte
    key = b"\x30\x81\x87\x02\x01\x00" + bytes(range(132))
    assert credential_kind(key.hex()) == "pem"


def test_der_claiming_fewer_bytes_than_it_has_is_no_key() -> None:
    # a length that stops more than two bytes short of the data is not the data's own:
    # random bytes that happen to start like a key
    claims_32 = b"\x30\x81\x20\x02\x01\x00" + bytes(range(60))
    assert credential_kind(claims_32.hex()) is None
    claims_all = b"\x30\x81\x3f\x02\x01\x00" + bytes(range(60))
    assert credential_kind(claims_all.hex()) == "pem"


def test_basic_needs_base64_of_user_and_password() -> None:
    assert credential_kind("Basic " + b64("alice:hunter2x")) == "credential_header"
    assert credential_kind("Basic " + b64("teamname")) is None  # no colon: no credential


def test_a_stray_character_before_the_padding_is_dropped() -> None:
    # 4k + 1 characters and padding: the last one cannot be base64's, and is dropped as
    # when a run is cut short; the rest is read
    assert credential_kind(b64("password=hunter2xy") + "Q==") == "credential_pair"


def test_superfluous_base64_padding_is_ignored() -> None:
    encoded = b64("password=hunter2xy")
    assert not encoded.endswith("=")  # 18 bytes: no padding needed
    assert credential_kind(encoded + "==") == "credential_pair"


def test_a_run_repeated_counts_once_towards_the_reading_bound() -> None:
    # 80 copies of one harmless run are one reading: the pair's run after them is still
    # decoded (64 readings in all would stop short of it if each copy counted)
    run = b64("harmless text 000")
    value = ",".join([run] * 80 + [b64(b64(PAIR))])
    assert credential_kind(value) == "credential_pair"


def test_a_zlib_header_with_nothing_after_it_adds_no_reading() -> None:
    # `eF 4` is base64 of `x^`, a zlib header that inflates to nothing: no text, so no
    # reading. 60 runs, then base64 of base64 of base64 of the pair: the pair's base64 is
    # reading 63, the last one decoded, only if `x^` took no reading before it.
    runs = [b64(f"harmless text {n:03}") for n in range(60)]
    value = ",".join([*runs, b64(b64(b64(PAIR))), "eF 4"])
    assert credential_kind(value) == "credential_pair"


@pytest.mark.parametrize("text", ["~~~password=hunter2x", "???password=hunter2x"])
def test_url_safe_base64_is_read_as_base64(text: str) -> None:
    # `~~~` encodes to `fn5-`, `???` to `Pz8_`: the URL-safe letters come first, so the
    # pair after them decodes only when `-` and `_` are read as `+` and `/`
    encoded = base64.urlsafe_b64encode(text.encode()).decode()
    assert "-" in encoded or "_" in encoded
    assert credential_kind(encoded) == "credential_pair"


@pytest.mark.parametrize("stray", ["Q", "x"])
def test_a_run_cut_inside_its_last_group_drops_the_stray_character(stray: str) -> None:
    # a value cut short can end a base64 run one character into a group of four (4k + 1
    # characters): that character is dropped and the rest read. The URL's `@` is the last
    # byte of the whole groups, so dropping one character more would lose it.
    url = b64("https://a:b@")  # 16 characters
    assert credential_kind(url + stray) == "credential_url"  # 17: one stray
    pair = b64("password=hunt2x")  # 20 characters
    assert credential_kind(pair + stray) == "credential_pair"  # 21: one stray
