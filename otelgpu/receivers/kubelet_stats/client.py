"""The kubelet peer: GET `/stats/summary` over HTTPS (or the read-only port's plain http).

`KubeletClient` is the narrow interface the receiver uses; `HttpKubeletClient` implements it
with aiohttp. The service-account token is read from its file when the file changes (kubelet
projected tokens rotate) and sent as a bearer token; it never appears in a log or an error.
The CA bundle is read when a session opens, and a session is dropped after a TLS failure, so
a bundle updated for a rotated certificate is read again at the next request.
"""

from __future__ import annotations

import os
import ssl
from typing import Protocol

import aiohttp

# The most a summary body may be. A 110-pod node's summary is ~300 KB, a 5,000-pod one ~13 MB;
# parsing it in Python takes about ten times its size in memory, so the bound keeps a kubelet
# (or whatever answers on its port) from making the agent hold gigabytes.
MAX_SUMMARY_BYTES = 64 << 20
ERROR_TEXT_BYTES = 512  # of a non-200 answer's body, kept in the error (the rest is not read)


class KubeletError(Exception):
    """A failed summary request. `reason` is a short label for counters (`connect`,
    `timeout`, `unauthorized`, `http_status`, `tls`, `token`, `too_large`, `incomplete`,
    `bad_json`)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class KubeletClient(Protocol):
    """Fetches the kubelet's stats summary."""

    async def summary(self) -> bytes:
        """The raw `/stats/summary` body; raises `KubeletError` for any failure."""

    async def close(self) -> None:
        """Releases connections; idempotent, safe without a request ever made."""


class TokenFile:
    """A bearer token file, re-read whenever its identity, size or mtime changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._token = ""

    def read(self) -> str:
        """The current token; KubeletError("token") naming only the path when unreadable."""
        try:
            info = os.stat(self.path)
            stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
            if stamp != self._stamp:
                with open(self.path, encoding="utf-8") as file:
                    self._token = file.read().strip()
                self._stamp = stamp
        except (OSError, UnicodeDecodeError) as exc:
            self._stamp = None
            detail = exc.strerror if isinstance(exc, OSError) else "not text"
            raise KubeletError("token", f"cannot read token {self.path}: {detail}") from None
        if not self._token:
            raise KubeletError("token", f"token file {self.path} is empty")
        return self._token


class HttpKubeletClient:
    """`KubeletClient` over aiohttp; the session is created by the first request."""

    def __init__(
        self,
        url: str,
        *,
        token: TokenFile | None,
        ca_file: str | None,
        verify: bool,
        timeout: float,
        max_bytes: int = MAX_SUMMARY_BYTES,
    ) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self._token = token
        self._ca_file = ca_file
        self._verify = verify
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def summary(self) -> bytes:
        headers = {"Accept": "application/json"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token.read()}"
        session = self._session or self._open()
        try:
            async with session.get(self.url, headers=headers, timeout=self._timeout) as response:
                await _check_status(response, self.url)
                return await self._body(response)
        except TimeoutError:  # first: aiohttp's timeout errors are ClientErrors too
            raise KubeletError("timeout", f"{self.url} did not answer in time") from None
        except aiohttp.ClientSSLError as exc:
            # The next request opens a new session, whose context reads ca_file again: a CA
            # bundle updated in place (a rotated kubelet or cluster CA) is trusted at once.
            await self.close()
            raise KubeletError("tls", f"TLS with {self.url} failed: {exc}") from None
        except aiohttp.ClientPayloadError as exc:
            raise KubeletError("incomplete", f"{self.url} broke off its answer: {exc}") from None
        except aiohttp.ClientError as exc:
            raise KubeletError("connect", f"cannot reach {self.url}: {exc}") from None

    async def _body(self, response: aiohttp.ClientResponse) -> bytes:
        """The whole body, however many pieces it arrives in, or `too_large` as soon as it
        is known to exceed `max_bytes` (from Content-Length, before reading anything)."""
        declared = response.content_length
        if declared is not None and declared > self.max_bytes:
            raise self._too_large()
        pieces: list[bytes] = []
        size = 0
        # iter_any yields each piece as it arrives and ends only at the end of the body
        # (a single `read(n)` returns whatever has arrived so far: a partial body). aiohttp
        # decompresses a gzip/deflate answer (its default, kept): the pieces, and so the bound,
        # are the decompressed bytes, so a small compressed body cannot exceed it either.
        async for piece in response.content.iter_any():
            size += len(piece)
            if size > self.max_bytes:
                raise self._too_large()
            pieces.append(piece)
        return b"".join(pieces)

    def _too_large(self) -> KubeletError:
        return KubeletError("too_large", f"{self.url} answered more than {self.max_bytes} bytes")

    def _open(self) -> aiohttp.ClientSession:
        ssl_context: ssl.SSLContext | bool = False
        if self.url.startswith("https://"):
            ssl_context = self._ssl_context()
        connector = aiohttp.TCPConnector(ssl=ssl_context, limit=1)
        self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    def _ssl_context(self) -> ssl.SSLContext:
        if not self._verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        try:
            return ssl.create_default_context(cafile=self._ca_file)
        except (OSError, ssl.SSLError) as exc:  # checked on every request until it loads
            raise KubeletError("tls", f"cannot load ca_file {self._ca_file}: {exc}") from None

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


async def _check_status(response: aiohttp.ClientResponse, url: str) -> None:
    """Raises for anything but 200, keeping the start of the kubelet's own error text."""
    status = response.status
    if status == 200:
        return
    text = await _error_text(response)
    if status in (401, 403):
        raise KubeletError(
            "unauthorized",
            f"{url} answered HTTP {status}: the token was refused or lacks RBAC on nodes/stats"
            + text,
        )
    raise KubeletError("http_status", f"{url} answered HTTP {status}{text}")


async def _error_text(response: aiohttp.ClientResponse) -> str:
    """': <the first ERROR_TEXT_BYTES of the body>' (printable, one line), or ''."""
    raw = bytearray()
    async for piece in response.content.iter_any():
        raw += piece[: ERROR_TEXT_BYTES - len(raw)]
        if len(raw) >= ERROR_TEXT_BYTES:
            break
    text = " ".join(raw.decode("utf-8", "replace").split())
    text = "".join(c if c.isprintable() else "?" for c in text)
    return f": {text}" if text else ""
