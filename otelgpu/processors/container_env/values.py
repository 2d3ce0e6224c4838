"""Value checks: credentials that hide under innocent key names, and the plain-value rule.

A key such as `DATABASE_URL` or `SENTRY_DSN` says nothing secret, yet its value carries a
password. Every value an include list asks for goes through `credential_kind` before it is
kept; a value that looks like a credential is refused whatever its key, whatever the include
list and `allow_secret_like_keys` say. The reason is counted; the value is never logged.

`credential_kind` reasons, in the order they are checked:
- `credential_url`: a URL with any user info (`scheme://user:pass@host`, `redis://:pass@`,
  `https://KEY@host/1` as in a Sentry DSN, `amqp://guest@host`), or a secret-like query
  parameter (`?password=`, `&sig=`, `?token=`).
- `credential_pair`: a secret-like name (the key rules, in every language and script they
  know) given a value anywhere in the text, whatever comes before it: `name=value` and
  `name: value` (every pair of a list; env files, properties, INI, TOML, HCL, query and
  connection strings, `-Dname=value`; JSON and YAML keys, quoted, escaped or not), a name of
  a few words (`parola d'ordine: X`), an XML element `<password>`, a name/value indirection
  (`name: DB_PASSWORD`), a `.pgpass` line (`host:5432:db:user:X`), or `password`,
  `passphrase`, `secret`, `token` or `api_key` followed by a space and a word that is not
  all lowercase letters (`.netrc`'s `password X`).
- `pem`: key material: a PEM block (`-----BEGIN ...-----`), also base64-encoded (as
  Kubernetes stores them), an OpenSSH key body without its header, a PuTTY key file, or
  DER key or certificate bytes (`_binary_shape`) found by decoding.
- `jwt`: a JSON Web Token (`eyJ...`.`...`.`...`), alone or after `Bearer `.
- `known_token`: a published token format (`tokens.TOKEN_FORMATS`, each with its source).
- `password_hash`: a crypt(3) or LDAP password hash with its body (htpasswd and shadow lines:
  `$apr1$...`, `$2y$...`, `$6$...`, `{SSHA}...`).
- `credential_flag`: a command-line option with a secret-like name (`--token X`,
  `--db-password=X`, `--requirepass X`), a password glued to `-p` or given to it (`mysql
  -pX`, `sshpass -p X`; not a path or a number), or `-u user:password`.
- `credential_header`: an HTTP authorization value: `Bearer`, `Negotiate` or `NTLM` and a
  credential of 6 characters or more, `Basic` and base64 of `user:password`, `Digest` and
  its parameters.
- `embedded_document`: a JSON object or array (or the start of one: `{"name": ...`), or a
  Kubernetes manifest (`apiVersion:` and `kind:`): such values are whole specs (and carry
  env values), never a business label.
The shapes above are also looked for in what the text decodes to, layer after layer
(`_readings`: at most `MAX_LAYERS` encoding steps): percent, HTML (`&quot;`) and `\\uXXXX` /
`\\xXX` escapes, full-width forms, every base64 or base64url run of 16 characters or more,
every hex run of 16 digits or more, base64 wrapped over lines, and gzip or zlib inside any of
them (base64 of gzip of a pair, hex of a URL with a password).
- `high_entropy`: a run of at least 20 characters without spaces or punctuation (`/`, `+`,
  `-`, `_` belong to base64 and stay in the run) that mixes upper case, lower case and digits,
  holds an alphanumeric stretch of 12 characters or more, is not a digest (`sha512-...`),
  whose Shannon entropy is at least 0.85 x log2(min(length, 64)) bits per character, and less
  than 60 % of which is word-like (`[A-Z]?[a-z]{3,}`). Random tokens and keys pass all of
  these; hex IDs (MLflow run IDs, digests, container IDs) and UUIDs are never mixed case, and
  camelCase names, model names, branch names and paths are mostly words or short stretches.
  A heuristic: measured on random alphanumeric and base64 tokens of 20-40 characters it
  catches 95-97 % (the shapes above catch the common tokens whatever their entropy).

`plain_refusal` is the stricter rule for a value whose key only a glob matched (the key was
not named in the include list): such a value is exported only when it is plainly safe, and
is otherwise refused for the first of these reasons:
- `glob_long_value`: longer than 64 characters;
- `glob_unsafe_characters`: a character other than ASCII letters, digits, space and `._/:-`
  (so no `=`, `@`, `{`, `;`, `&`, `%`, `+`, `,`, quotes, tabs or newlines: no pairs, no
  documents, no URL user info, no encodings);
- `glob_command_line`: an option (`-x`, `--name`) at the start or after a space;
- `glob_secret_word`: a word the key rules refuse (`password`, `token`, `auth`, ...);
- `glob_pair`: two parts and one `:` or `/` (`user:password`, `user/password`), the second
  not a number or a version (`db:5432`, `python:3.11` pass);
- `glob_grouped_key`: three or more groups of one length joined by one of `-._:`, three of
  them different, a digit among them, 12 characters or more (licence-style and dotted keys,
  colon-hex key material);
- `glob_random_value`: an alphanumeric stretch of 12 characters or more that mixes two of
  upper case, lower case and digits, has at least 0.75 x log2(min(length, alphabet)) bits per
  character (the alphabet is 16 for hex, else the letters and digits it uses), and is less
  than 60 % word-like (`[A-Z]?[a-z]{2,}`) or switches between letters and digits at least
  once every 4 characters: random tokens, passwords, hex IDs, UUIDs, commit SHAs. Measured on
  random stretches of 12-32 characters it catches 84-100 % (hex of 12-16: 85-89 %), while
  names such as `ResNet50V2ImageNet`, `checkpoint0042` and `20240501T120000Z` pass.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterator
from urllib.parse import unquote

from otelgpu.config.secret_keys import looks_secret, mentions_secret
from otelgpu.processors.container_env.tokens import KNOWN_TOKEN_PATTERN

CREDENTIAL_URL = "credential_url"
CREDENTIAL_PAIR = "credential_pair"
CREDENTIAL_FLAG = "credential_flag"
CREDENTIAL_HEADER = "credential_header"
PEM = "pem"
JWT = "jwt"
KNOWN_TOKEN = "known_token"
PASSWORD_HASH = "password_hash"
EMBEDDED_DOCUMENT = "embedded_document"
HIGH_ENTROPY = "high_entropy"

GLOB_LONG_VALUE = "glob_long_value"
GLOB_UNSAFE_CHARACTERS = "glob_unsafe_characters"
GLOB_COMMAND_LINE = "glob_command_line"
GLOB_SECRET_WORD = "glob_secret_word"
GLOB_RANDOM_VALUE = "glob_random_value"
GLOB_PAIR = "glob_pair"
GLOB_GROUPED_KEY = "glob_grouped_key"
GLOB_REASONS = frozenset(
    {
        GLOB_LONG_VALUE,
        GLOB_UNSAFE_CHARACTERS,
        GLOB_COMMAND_LINE,
        GLOB_SECRET_WORD,
        GLOB_PAIR,
        GLOB_GROUPED_KEY,
        GLOB_RANDOM_VALUE,
    }
)

# scheme://userinfo@ — the user info ends at the first `@` before any `/`, `?` or `#`.
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^/?#@\s]{0,512}@")
_URL_QUERY = re.compile(r"[?&;]([^=&;#\s]{1,64})=")

# A name given a value: the name is a whole run of name characters (nothing before it is
# consumed, so every pair of a list is seen), then closing quotes or brackets, then `=` with
# something after it (not base64's `=` padding), or
# `:` unless a path or an address leads to it (`ghcr.io/org/auth:1.0` is an image and tag).
_NAME_CHARS = r"\w.\-"  # letters of every script: `пароль: ...` is a pair
_CLOSE = r"[\\\"'`\]>)]{0,4}[ \t]{0,8}"
_ASSIGNED = re.compile(
    rf"(?<![{_NAME_CHARS}])([{_NAME_CHARS}]+)(?={_CLOSE}=(?!=|$))"
    rf"|(?<![{_NAME_CHARS}/@:])([{_NAME_CHARS}]+)(?={_CLOSE}:)"
)
_QUOTED_ASSIGNED = re.compile(r"\\?([\"'])([^\"'\\\n]{1,64})\\?\1[ \t]{0,8}[=:]")
# A name of a few words given a value (`parola d'ordine: x`, `mot de passe = x`).
_PHRASE_ASSIGNED = re.compile(r"((?:[^\W\d_]+['\u2019 ]){1,3}[^\W\d_]+)[ \t]{0,8}[:=]")
_ELEMENT = re.compile(r"<([^\W\d][\w.:\-]{0,63})[\s>/]")
_INDIRECT = re.compile(
    rf"(?<![{_NAME_CHARS}])(?:name|key)[\\\"']{{0,3}}[ \t]{{0,8}}[=:][ \t]{{0,8}}[\\\"']{{0,3}}"
    rf"([{_NAME_CHARS}]+)"
)
_SECRET_WORD = re.compile(
    r"(?<![A-Za-z0-9_\-])(?i:passw(?:or)?d|passphrase|secret|token|api[-_]?key)[ \t]+(\S{4,})"
)
_ALL_LOWER = re.compile(r"[a-z]+")

# An option starts where no name character comes before it; its name is taken whole.
_OPTION = re.compile(rf"(?<![{_NAME_CHARS}])(--?[A-Za-z0-9_][{_NAME_CHARS}]*)")
# `-p` with a password glued to it or given after it (not a path, a number or an option).
_PASSWORD_OPTION = re.compile(rf"(?<![{_NAME_CHARS}])-p(?:\S|[ \t]+[^\s/.~0-9\-])")
_USER_OPTION = re.compile(
    rf"(?<![{_NAME_CHARS}])(?:-u[ \t]*|--user[ \t=]+)(?![0-9:]+(?:\s|$))[^\s:@/]+:[^\s@]"
)

_AUTH_TOKEN = re.compile(r"(?i)(?<![a-z0-9])(?:bearer|negotiate|ntlm)[ \t]+[a-z0-9._~+/=\-]{6,}")
_AUTH_BASIC = re.compile(r"(?i)(?<![a-z0-9])basic[ \t]+([a-z0-9+/]{8,}={0,2})")
_AUTH_DIGEST = re.compile(r"(?i)(?<![a-z0-9])digest[ \t]+[a-z]+=")

# A PEM header, its base64 (`-----BEGIN`), an OpenSSH key body's base64 (`openssh-key-v1`)
# and a PuTTY key file's first line.
_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,64}-----|LS0tLS1CRUdJT|b3BlbnNzaC1rZXktdjE|PuTTY-User-Key-File-\d"
)
_OPENSSH_MAGIC = b"openssh-key-v1\0"
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
# crypt(3) and LDAP password hashes (htpasswd, /etc/shadow, slapd): `$apr1$`, `$2y$`,
# `$6$`, `$argon2id$`, `{SSHA}`, ...
_PASSWORD_HASH = re.compile(
    r"(?:\$(?:1|2[abxy]?|5|6|7|y|gy|apr1|argon2(?:id|i|d)|scrypt|pbkdf2(?:-sha\d+)?)\$"
    r"|\{(?:S?SHA(?:256|384|512)?|S?MD5|CRYPT|PBKDF2[\w-]*|ARGON2)\})[$./=,A-Za-z0-9+]{4}",
    re.IGNORECASE,
)
# A .pgpass line: host:port:database:user:password (not five bytes in colon-hex).
_PGPASS = re.compile(r"(?m)^[^:\s]+:(?:\d+|\*):[^:\s]+:[^:\s]+:[^:\s]+$")
_COLON_HEX = re.compile(r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2})+")
# Two searches, not one `apiVersion.*kind` pattern: that one backtracks quadratically.
_API_VERSION = re.compile(r"\bapiVersion[\"']?\s{0,8}:")
_KIND = re.compile(r"\bkind[\"']?\s{0,8}:")
_JSON_OBJECT_START = re.compile(r"[\[{]\s{0,8}\[?\s{0,8}\{?\s{0,8}\"[^\"]{0,256}\"\s{0,8}:")
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\x([0-9A-Fa-f]{2})")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{16,}={0,2}")
_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){8,}(?![0-9A-Fa-f])")
_WRAPPED_BASE64 = re.compile(r"[A-Za-z0-9+/_\-]+(?:\s+[A-Za-z0-9+/_\-]+)+\s*={0,2}\s*")
MIN_PRINTABLE = 0.9  # of decoded bytes, for them to be text worth checking
MIN_DER_LENGTH = 32  # bytes: an Ed25519 key in PKCS#8 is 48, a SHA-1 digest 20
# Decoding is bounded: at most this many layers deep (base64 of a pair is 1, base64 of
# base64 of it 2; decompressing gzip or zlib is part of the layer that exposed it), this
# many readings of one value in all, and this many bytes out of one decompression.
MAX_LAYERS = 4
MAX_READINGS = 64
MAX_INFLATED = 4096
_RUN_SPLIT = re.compile(r"[\s\"',;:=&?#@()\[\]{}<>|\\.]+")
_SEGMENTS = re.compile(r"[A-Za-z0-9]+")
MIN_RANDOM_STRETCH = 12  # a random run holds an alphanumeric stretch this long
# A digest in the Subresource Integrity or OCI form: random by construction, never a key.
_DIGEST = re.compile(r"(?:sha(?:1|224|256|384|512)|md5|blake2b?)[-:]", re.IGNORECASE)

MIN_ENTROPY_RUN = 20
ENTROPY_FRACTION = 0.85  # of the most a run of that length can have (alphabet of 64)
MAX_WORD_COVER = 0.6
_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}")
_UPPER, _LOWER, _DIGIT = re.compile(r"[A-Z]"), re.compile(r"[a-z]"), re.compile(r"[0-9]")

MAX_PLAIN_LENGTH = 64
_PLAIN = re.compile(r"[A-Za-z0-9 ._/:\-]*")
_PLAIN_OPTION = re.compile(r"(?:^| )--?[A-Za-z]")
_SEGMENT_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
MIN_RANDOM_SEGMENT = 12
PLAIN_ENTROPY_FRACTION = 0.75
MIN_SWITCH_RATE = 0.25  # letter/digit switches per character of a random stretch
_PLAIN_WORDLIKE = re.compile(r"[A-Z]?[a-z]{2,}")
_SWITCH = re.compile(r"(?<=[0-9])(?=[A-Za-z])|(?<=[A-Za-z])(?=[0-9])")
# `user:password` or `user/password`: two parts and one separator, the second not a number
# or a version (`db:5432`, `python:3.11` pass).
_GLOB_PAIR = re.compile(r"([^\s:/]+)[:/]([^\s:/]+)")
_VERSION = re.compile(r"[0-9][0-9.]*")
# Three or more groups of one length joined by one kind of separator, three of them or more
# different, a digit among them: licence keys (`ABCD-EF12-...`), dotted random keys, key
# fingerprints and key material in colon-hex.
_GROUPED = re.compile(r"[A-Za-z0-9]{2,}(?:([-.:_])[A-Za-z0-9]{2,})(?:\1[A-Za-z0-9]{2,})+")
MIN_GROUPED_LENGTH = 12
MIN_DISTINCT_GROUPS = 3


def credential_kind(value: str) -> str | None:
    """The reason `value` looks like a credential (module doc), or None when it does not."""
    for reading in _readings(value):
        reason = _binary_shape(reading) if isinstance(reading, bytes) else _shape(reading)
        if reason is not None:
            return reason
    if any(_is_random(run) for run in _RUN_SPLIT.split(value) if len(run) >= MIN_ENTROPY_RUN):
        return HIGH_ENTROPY
    return None


def plain_refusal(value: str) -> str | None:
    """Why `value` is not plainly safe for a key only a glob matched (module doc), or None.
    Meant for values `credential_kind` found nothing in."""
    if len(value) > MAX_PLAIN_LENGTH:
        return GLOB_LONG_VALUE
    if not _PLAIN.fullmatch(value):
        return GLOB_UNSAFE_CHARACTERS
    if _PLAIN_OPTION.search(value):
        return GLOB_COMMAND_LINE
    if mentions_secret(value):
        return GLOB_SECRET_WORD
    if _is_glob_pair(value):
        return GLOB_PAIR
    if _is_grouped_key(value):
        return GLOB_GROUPED_KEY
    if any(_is_random_segment(s) for s in _SEGMENT_SPLIT.split(value)):
        return GLOB_RANDOM_VALUE
    return None


def _is_glob_pair(value: str) -> bool:
    pair = _GLOB_PAIR.fullmatch(value)
    return pair is not None and not _VERSION.fullmatch(pair.group(2))


def _is_grouped_key(value: str) -> bool:
    """Three or more groups of one length, one separator, 12 characters or more in all,
    three groups or more different, a digit among them."""
    if not (grouped := _GROUPED.fullmatch(value)):
        return False
    groups = value.split(grouped.group(1))
    return (
        len({len(g) for g in groups}) == 1
        and len(set(groups)) >= MIN_DISTINCT_GROUPS
        and sum(map(len, groups)) >= MIN_GROUPED_LENGTH
        and _DIGIT.search(value) is not None
    )


def _readings(value: str) -> Iterator[str | bytes]:
    """`value`, then what it decodes to, layer after layer (at most `MAX_LAYERS` deep and
    `MAX_READINGS` in all): percent, HTML and `\\uXXXX` / `\\xXX` escapes, NFKC forms
    (a full-width colon), and each base64 or hex run (or base64 wrapped over lines) as bytes,
    inflated when gzip or zlib (in the same layer), and as text when mostly printable."""
    seen: set[str | bytes] = {value}
    layer = [value]
    count = 0
    for depth in range(MAX_LAYERS + 1):
        following: list[str] = []
        for text in layer:
            yield text
            count += 1
            if count >= MAX_READINGS or depth == MAX_LAYERS:
                continue
            for reading in _decoded(text):
                if reading in seen:
                    continue
                seen.add(reading)
                if isinstance(reading, bytes):
                    yield reading
                else:
                    following.append(reading)
        layer = following
        if not layer:
            return


def _decoded(text: str) -> Iterator[str | bytes]:
    """What `text` says one layer down: its escapes decoded, its encoded runs as bytes (and
    their text)."""
    if "%" in text:
        yield unquote(text)
    if "&" in text:
        import html  # on first use: its entity table is 0.3 MiB, and few values have a "&"

        yield html.unescape(text)
    if "\\" in text:
        yield _ESCAPE.sub(_unescape, text)
    if not text.isascii():
        yield unicodedata.normalize("NFKC", text)
    raws = [_base64_bytes(run) for run in _BASE64_RUN.findall(text)]
    raws += [bytes.fromhex(run) for run in _HEX_RUN.findall(text)]
    raws += [_base64_bytes("".join(w.split())) for w in _WRAPPED_BASE64.findall(text)]
    for raw in raws:
        if raw is None:
            continue
        yield raw
        if (inflated := _inflated(raw)) is not None:
            yield inflated
            raw = inflated
        if (decoded := _printable(raw)) is not None:
            yield decoded


def _inflated(raw: bytes) -> bytes | None:
    """`raw` decompressed (at most `MAX_INFLATED` bytes) when it is gzip or zlib."""
    if raw[:2] == b"\x1f\x8b":
        wbits = 16 + zlib.MAX_WBITS
    elif len(raw) > 1 and raw[0] & 0x0F == 8 and (raw[0] << 8 | raw[1]) % 31 == 0:
        wbits = zlib.MAX_WBITS
    else:
        return None
    try:
        return zlib.decompressobj(wbits).decompress(raw, MAX_INFLATED)
    except zlib.error:
        return None


def _printable(raw: bytes) -> str | None:
    """The text of `raw` when at least 90 % of it is printable (a byte that is not UTF-8
    counts against it), else None."""
    text = raw.decode("utf-8", errors="replace")
    printable = sum((ch.isprintable() and ch != "\ufffd") or ch in "\n\r\t" for ch in text)
    return text if text and printable >= MIN_PRINTABLE * len(text) else None


def _binary_shape(raw: bytes) -> str | None:
    """`pem` for key material without its PEM header: an OpenSSH key body, or DER (a
    SEQUENCE that claims at least the bytes it has, whose first element is a small version
    INTEGER, as in PKCS#1, PKCS#8 and SEC1 keys, or a long SEQUENCE, as in an X.509
    certificate). Random bytes (a hex ID, a digest) are not: 32 bytes at least, and the
    chance of this header in them is under one in a million."""
    if raw.startswith(_OPENSSH_MAGIC):
        return PEM
    if len(raw) < MIN_DER_LENGTH or raw[0] != 0x30:
        return None
    length_bytes = raw[1] & 0x7F if raw[1] & 0x80 else 0
    if length_bytes > 3:
        return None
    declared = int.from_bytes(raw[2 : 2 + length_bytes]) if length_bytes else raw[1]
    body = raw[2 + length_bytes :]
    if declared < len(body) - 2:
        return None
    version = body[:2] == b"\x02\x01" and body[2] <= 3
    certificate = body[0] == 0x30 and body[1] in (0x81, 0x82, 0x83)
    return PEM if version or certificate else None


def _unescape(match: re.Match[str]) -> str:
    return chr(int(match.group(1) or match.group(2), 16))


def _shape(text: str) -> str | None:
    if _credential_url(text):
        return CREDENTIAL_URL
    if _credential_pair(text):
        return CREDENTIAL_PAIR
    if _PEM.search(text):
        return PEM
    if _JWT.search(text):
        return JWT
    if KNOWN_TOKEN_PATTERN.search(text):
        return KNOWN_TOKEN
    if _PASSWORD_HASH.search(text):
        return PASSWORD_HASH
    if _credential_flag(text):
        return CREDENTIAL_FLAG
    if _credential_header(text):
        return CREDENTIAL_HEADER
    if _is_document(text):
        return EMBEDDED_DOCUMENT
    return None


def _credential_url(value: str) -> bool:
    if "://" not in value:
        return False
    if _URL_USERINFO.search(value):
        return True
    return any(looks_secret(name) for name in _URL_QUERY.findall(value))


def _credential_pair(text: str) -> bool:
    names = [
        *(equals or colon for equals, colon in _ASSIGNED.findall(text)),
        *(name for _, name in _QUOTED_ASSIGNED.findall(text)),
        *_ELEMENT.findall(text),
        *_INDIRECT.findall(text),
        *_PHRASE_ASSIGNED.findall(text),
    ]
    if any(looks_secret(name) for name in names):
        return True
    if ":" in text and any(not _COLON_HEX.fullmatch(line) for line in _PGPASS.findall(text)):
        return True
    return any(not _ALL_LOWER.fullmatch(word) for word in _SECRET_WORD.findall(text))


def _credential_flag(text: str) -> bool:
    if "-" not in text:
        return False
    if _PASSWORD_OPTION.search(text) or _USER_OPTION.search(text):
        return True
    return any(looks_secret(option) for option in _OPTION.findall(text))


def _credential_header(text: str) -> bool:
    if _AUTH_TOKEN.search(text) or _AUTH_DIGEST.search(text):
        return True
    for encoded in _AUTH_BASIC.findall(text):
        raw = _base64_bytes(encoded)
        decoded = _printable(raw) if raw is not None else None
        if decoded is not None and ":" in decoded:
            return True
    return False


def _base64_bytes(run: str) -> bytes | None:
    """The bytes `run` encodes in base64 (standard or URL-safe, padding optional), or None
    when it is not base64."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:  # cut short (the checked span ends inside it): drop the stray
        body = body[:-1]
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw or None


def _is_document(value: str) -> bool:
    text = value.strip()
    if text[:1] in ("{", "["):
        if _JSON_OBJECT_START.match(text):  # also when the caller cut the value short
            return True
        try:
            return isinstance(json.loads(text), (dict, list))
        except ValueError:
            return False
    return bool(_API_VERSION.search(text) and _KIND.search(text))


def _is_random(run: str) -> bool:
    """Mixed-case-and-digits runs, of high entropy, mostly not words (module doc)."""
    if not (_UPPER.search(run) and _LOWER.search(run) and _DIGIT.search(run)):
        return False
    if _DIGEST.match(run) or max(map(len, _SEGMENTS.findall(run))) < MIN_RANDOM_STRETCH:
        return False
    return _entropy(run) >= ENTROPY_FRACTION * math.log2(min(len(run), 64)) and _few_words(run)


def _is_random_segment(segment: str) -> bool:
    """An alphanumeric stretch that looks random to the plain-value rule (module doc)."""
    n = len(segment)
    if n < MIN_RANDOM_SEGMENT:
        return False
    upper, lower, digit = (bool(p.search(segment)) for p in (_UPPER, _LOWER, _DIGIT))
    if upper + lower + digit < 2:
        return False
    alphabet = 16 if _HEX.fullmatch(segment) else 26 * upper + 26 * lower + 10 * digit
    if _entropy(segment) < PLAIN_ENTROPY_FRACTION * math.log2(min(n, alphabet)):
        return False
    # Random lowercase reads as "words" to the pattern; it switches to digits far more often.
    switches = len(_SWITCH.findall(segment))
    return _few_words(segment, _PLAIN_WORDLIKE) or switches >= MIN_SWITCH_RATE * n


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _few_words(text: str, wordlike: re.Pattern[str] = _WORDLIKE) -> bool:
    return sum(map(len, wordlike.findall(text))) < MAX_WORD_COVER * len(text)
