"""Credential shapes: what a credential looks like in a value's text or bytes.

`text_shape` gives the first of these reasons a text matches, in this order:
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
  Kubernetes stores them), an OpenSSH key body without its header, or a PuTTY key file.
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

`binary_shape` gives `pem` for DER key or certificate bytes, or an OpenSSH key body, that
decoding (value_decoding.py) exposed.
"""

from __future__ import annotations

import json
import re

from otelgpu.config.secret_keys import looks_secret
from otelgpu.processors.container_env.tokens import KNOWN_TOKEN_PATTERN
from otelgpu.processors.container_env.value_decoding import base64_bytes, printable_text

CREDENTIAL_URL = "credential_url"
CREDENTIAL_PAIR = "credential_pair"
CREDENTIAL_FLAG = "credential_flag"
CREDENTIAL_HEADER = "credential_header"
PEM = "pem"
JWT = "jwt"
KNOWN_TOKEN = "known_token"
PASSWORD_HASH = "password_hash"
EMBEDDED_DOCUMENT = "embedded_document"

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
# Options that are a password only to the tool before them on the same command line: redis-cli's
# `-a`, SQL Server tools' `-P`, the OpenLDAP clients' `-w` and smbclient's `-U user%password`
# (a value after the option, not another option, within 256 characters of the name: bounds the
# cost of a value full of tool names; openssl's `pass:x` is a pair).
_TOOL_PASSWORD = re.compile(
    rf"(?<![{_NAME_CHARS}])(?:"
    r"redis-cli\b[^\n;|&]{0,256}?[ \t]-a[ \t]+(?!-)\S"
    r"|(?:sqlcmd|bcp|osql|isql)\b[^\n;|&]{0,256}?[ \t]-P[ \t]*(?!-)\S"
    r"|ldap[a-z]{3,9}\b[^\n;|&]{0,256}?[ \t]-w[ \t]*(?!-)\S"
    r"|smbclient\b[^\n;|&]{0,256}?[ \t](?:-U|--user)[ \t=]*[^\s%]+%\S"
    r")"
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
MIN_DER_LENGTH = 32  # bytes: an Ed25519 key in PKCS#8 is 48, a SHA-1 digest 20


def text_shape(text: str) -> str | None:
    """The first credential shape `text` holds (module doc), or None."""
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


def binary_shape(raw: bytes) -> str | None:
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
    if _PASSWORD_OPTION.search(text) or _USER_OPTION.search(text) or _TOOL_PASSWORD.search(text):
        return True
    return any(looks_secret(option) for option in _OPTION.findall(text))


def _credential_header(text: str) -> bool:
    if _AUTH_TOKEN.search(text) or _AUTH_DIGEST.search(text):
        return True
    for encoded in _AUTH_BASIC.findall(text):
        raw = base64_bytes(encoded)
        decoded = printable_text(raw) if raw is not None else None
        if decoded is not None and ":" in decoded:
            return True
    return False


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
