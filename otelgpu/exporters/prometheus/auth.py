"""TLS and HTTP basic auth for `/metrics`, the way Prometheus' exporter-toolkit does them.

Basic auth checks the password with bcrypt every time it has not seen this exact
(user, password) pair succeed before, and for an unknown user it still runs bcrypt, against a
hash of the same cost, so the answer takes as long whether or not the user exists. Successful
checks are remembered under an HMAC of the length-prefixed pair with a per-process random key:
the cache holds neither a password nor anything an attacker could precompute, and no crafted
username can collide with another pair's key (CVE-2022-46146 was such a collision).

Checks run one at a time on one private thread, and the line in front of it is bounded: one
two checks at a time per client address (a third concurrent one is answered 429) and
`MAX_PENDING` for all clients together (503). Both answers come at once, before any look at the
credentials, so a flood of wrong passwords from one client costs one core and cannot push a
valid scraper from another address more than a few checks back, and the time of an answer
still says nothing about the password.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import os
import ssl
from concurrent.futures import ThreadPoolExecutor

import bcrypt

from otelgpu.exporters.prometheus.config import BasicAuthConfig, TLSServerConfig

_CACHE_LIMIT = 256  # distinct successful (user, password) pairs remembered
MAX_PENDING = 8  # checks running or waiting, all clients together
PER_PEER = 2  # checks running or waiting for one client address (two jobs may share one)


class AuthBusy(Exception):
    """The check was not run: too many are already waiting. `status` is the HTTP answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_TLS_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def server_ssl_context(config: TLSServerConfig) -> ssl.SSLContext:
    """A server context: TLS ≥ `min_version` (never below 1.2), optional client verification."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _TLS_VERSIONS[config.min_version]
    context.load_cert_chain(config.cert_file, config.key_file)
    if config.client_ca_file:
        context.load_verify_locations(cafile=config.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class BasicAuthenticator:
    """Checks `Authorization: Basic ...` headers against one user and bcrypt hash."""

    def __init__(self, config: BasicAuthConfig) -> None:
        self._user = config.username.encode()
        self._hash = config.password_hash.get_secret_value().encode()
        self._fake_hash = b""
        self._key = b""
        self._ok: set[bytes] = set()
        self._pending = 0
        self._pending_by_peer: dict[str, int] = {}
        # One private thread: checks run one at a time (a flood of wrong passwords costs one
        # core) and never queue behind other components' work in the default executor.
        self._executor: ThreadPoolExecutor | None = None

    async def prepare(self) -> None:
        """Builds the fake hash (same cost as the real one) and the cache key; call in start()."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="otelgpu basic auth")
        salt = bcrypt.gensalt(rounds=int(self._hash.split(b"$")[2]))
        loop = asyncio.get_running_loop()
        self._fake_hash = await loop.run_in_executor(
            self._executor, bcrypt.hashpw, os.urandom(16), salt
        )
        self._key = os.urandom(32)

    def close(self) -> None:
        """Stops the bcrypt thread, waiting for a check in progress; idempotent. Blocks: call
        it from a worker thread."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    async def check(self, header: str | None, peer: str = "") -> bool:
        """Whether the header carries the right user and password. Raises AuthBusy, without
        looking at the credentials, when `peer` or everyone already has checks waiting."""
        user, password = _parse(header)
        cache_key = self._cache_key(user, password)
        if cache_key in self._ok:
            return True
        assert self._executor is not None, "prepare() was not awaited"
        self._admit(peer)
        try:
            user_ok = hmac.compare_digest(user, self._user)
            against = self._hash if user_ok else self._fake_hash
            loop = asyncio.get_running_loop()
            password_ok = await loop.run_in_executor(self._executor, _checkpw, password, against)
        finally:
            self._release(peer)
        if user_ok and password_ok:
            if len(self._ok) >= _CACHE_LIMIT:
                self._ok.clear()
            self._ok.add(cache_key)
            return True
        return False

    def _admit(self, peer: str) -> None:
        if self._pending_by_peer.get(peer, 0) >= PER_PEER:
            raise AuthBusy(429, "too many concurrent authentication attempts from this client")
        if self._pending >= MAX_PENDING:
            raise AuthBusy(503, "too many authentication attempts in progress")
        self._pending += 1
        self._pending_by_peer[peer] = self._pending_by_peer.get(peer, 0) + 1

    def _release(self, peer: str) -> None:
        self._pending -= 1
        left = self._pending_by_peer.pop(peer) - 1
        if left:
            self._pending_by_peer[peer] = left

    def _cache_key(self, user: bytes, password: bytes) -> bytes:
        message = len(user).to_bytes(8, "big") + user + len(password).to_bytes(8, "big") + password
        return hmac.new(self._key, message, hashlib.sha256).digest()


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:
        return False


def _parse(header: str | None) -> tuple[bytes, bytes]:
    """(user, password) from a Basic header (RFC 7617: `Basic base64(user:password)`, UTF-8);
    empty on anything malformed (still checked, so a malformed header takes as long as a wrong
    password)."""
    scheme, _, credentials = (header or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return b"", b""
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return b"", b""
    user, colon, password = decoded.partition(":")
    if not colon:
        return b"", b""
    return user.encode(), password.encode()
