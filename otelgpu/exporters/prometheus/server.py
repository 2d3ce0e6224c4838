"""The HTTP side: the current pre-rendered body at `/metrics`, and `/health`.

The server runs on its own thread and event loop (`otelgpu.confighttp.listener`): a request reads
one `Exposition` reference the exporter published and writes its bytes; it never renders
(only an OpenMetrics scrape of a body no one converted yet converts it, once), never
collects, never waits on NVML, the kubelet, a container runtime, or the pipeline's loop.
Connections are capped (TLS handshakes included) and idle ones closed, answers a client does
not read time out (`otelgpu.confighttp.listener`); a (user, password) pair that passed once is
answered at once with no check, and a client whose password check would have to wait behind
too many others is answered 429 / 503 at once (`auth.AuthBusy`).

`/health` answers as dcgm-exporter's does (200, body `OK`), so probes written for it keep
working: it says the exporter serves, nothing about sources (that is the health_check
extension's `/readyz`). It needs no password, like dcgm-exporter's.

Formats (`negotiate`): OpenMetrics 1.0 when the Accept header prefers
`application/openmetrics-text` (what Prometheus 2.x and 3.x send by default), classic text
otherwise (no Accept, `*/*`, `text/plain`). Our names are legacy-valid, so they read the same
under the `allow-utf-8`, `underscores` and `values` escapings: the answer names the requested
one (or `underscores` when none or `dots` was asked; `dots` would rename every `_`).

What a request is answered with (`current`, `on_scrape`, the authenticator) can be swapped
while the socket stays open (`serve`): that is how the next exporter instance takes a running
server over on a reload, with no moment the port is closed.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from otelgpu.confighttp.listener import (
    HANDSHAKE_TIMEOUT,
    IDLE_TIMEOUT,
    MAX_CONNECTIONS,
    WRITE_TIMEOUT,
    Listener,
    Request,
    Response,
)
from otelgpu.exporters.prometheus import openmetrics
from otelgpu.exporters.prometheus.auth import AuthBusy, BasicAuthenticator
from otelgpu.exporters.prometheus.openmetrics import Exposition
from otelgpu.exporters.prometheus.render import CONTENT_TYPE, Body

_TEXT = ("Content-Type", "text/plain; charset=utf-8")
_UNAUTHORIZED = ("WWW-Authenticate", 'Basic realm="otelgpu", charset="UTF-8"')
_VARY = ("Vary", "Accept, Accept-Encoding")
_GZIP = ("Content-Encoding", "gzip")
TEXT = "text"  # the `format` label of the scrape counter
OPENMETRICS = "openmetrics"
_ESCAPINGS = ("allow-utf-8", "underscores", "values")  # identity on legacy-valid names
# Anyone gets it, password or not: it never makes a connection one a newcomer cannot evict
# at the connection cap (`Response.establishes`), or a flood could pin every slot with it.
_HEALTH = Response(200, b"OK", (_TEXT, ("X-Content-Type-Options", "nosniff")), establishes=False)
_NOT_FOUND = Response(404, b"404: Not Found\n", (_TEXT,))
_NOT_ALLOWED = Response(405, b"405: Method Not Allowed\n", (_TEXT, ("Allow", "GET, HEAD")))
# A scraper sends the same Accept and Accept-Encoding headers every time, so what they negotiate
# is kept for the last few distinct values seen: parsing Prometheus's five-range Accept header
# is ~15 µs of Python on the answering thread, a sixth of a scrape's. Bounded, so a client
# sending a new header each time churns the cache and cannot grow it.
NEGOTIATED = 64


@dataclass(frozen=True, slots=True)
class _Answering:
    """What requests are answered with; replaced whole by `serve` (read once per request)."""

    current: Callable[[], Exposition | Body]
    on_scrape: Callable[[int, str], None]
    auth: BasicAuthenticator | None


class MetricsServer:
    """Serves `current()` at `/metrics`; `on_scrape(status, format)` is told every answer's
    status and the format negotiated (`TEXT` or `OPENMETRICS`), from the server's thread: it
    must be thread-safe, as self-telemetry counters are. `current` returns an `Exposition`
    (the exporter's, which keeps its OpenMetrics rendering) or a bare classic `Body` (then an
    OpenMetrics scrape converts it every time: for tests and tools, not for the exporter).

    It owns the authenticator it is given: `stop` (or a `serve` replacing it) closes it.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        current: Callable[[], Exposition | Body],
        on_scrape: Callable[[int, str], None],
        ssl_context: ssl.SSLContext | None = None,
        authenticator: BasicAuthenticator | None = None,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
        write_timeout: float = WRITE_TIMEOUT,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self._answering = _Answering(current, on_scrape, authenticator)
        self._listener = Listener(
            self._handle,
            host,
            port,
            ssl_context=ssl_context,
            max_connections=max_connections,
            idle_timeout=idle_timeout,
            write_timeout=write_timeout,
            handshake_timeout=handshake_timeout,
            name=f"otelgpu /metrics :{port}",
        )
        self.port = port

    @property
    def connections(self) -> int:
        """Client connections open now."""
        return self._listener.connections

    async def start(self) -> None:
        """Binds and listens (on the server's own thread); raises OSError when the address is
        taken."""
        await self._listener.start()
        self.port = self._listener.port

    async def stop(self) -> None:
        """Closes the listener, open connections, the thread and the authenticator;
        idempotent."""
        await self._listener.stop()
        answering = self._answering
        self._answering = _Answering(answering.current, answering.on_scrape, None)
        await _close(answering.auth)

    def current(self) -> Exposition:
        """The body a scrape gets right now."""
        return _exposition(self._answering.current())

    async def serve(
        self,
        current: Callable[[], Exposition | Body],
        on_scrape: Callable[[int, str], None],
        authenticator: BasicAuthenticator | None,
    ) -> None:
        """Answers from now on with these (a new exporter taking the server over); closes the
        authenticator it replaces once no check is waiting on it. A new authenticator for the
        same user and hash keeps what the one it replaces learnt (`take_over`)."""
        replaced = self._answering.auth
        if authenticator is not None and replaced is not None:
            authenticator.take_over(replaced)
        self._answering = _Answering(current, on_scrape, authenticator)
        await _close(replaced)

    def _handle(self, request: Request) -> Response | Awaitable[Response]:
        """The answer, at once; an awaitable of it only when a password must be checked."""
        if request.method not in ("GET", "HEAD"):
            return _NOT_ALLOWED
        if request.path == "/health":
            return _HEALTH
        if request.path != "/metrics":
            return _NOT_FOUND
        answering = self._answering
        format_ = negotiate(request.headers.get("accept", ""))
        auth = answering.auth
        if auth is not None and not auth.remembers(request.headers.get("authorization")):
            return _checked(auth, answering, request, format_)
        return _metrics(answering, request, format_)


async def _checked(
    auth: BasicAuthenticator, answering: _Answering, request: Request, format_: tuple[str, str]
) -> Response:
    refused = await _authenticate(auth, request)
    if refused is not None:
        answering.on_scrape(refused.status, format_[0])
        return refused
    return _metrics(answering, request, format_)


def _metrics(answering: _Answering, request: Request, negotiated: tuple[str, str]) -> Response:
    format_, content_type = negotiated
    exposition = _exposition(answering.current())
    body = exposition.classic if format_ == TEXT else exposition.openmetrics()
    answering.on_scrape(200, format_)
    headers: tuple[tuple[str, str], ...] = (("Content-Type", content_type), _VARY)
    if accepts_gzip(request.headers.get("accept-encoding", "")):
        return Response(200, body.gzipped, (*headers, _GZIP))
    return Response(200, body.plain, headers)


def _exposition(current: Exposition | Body) -> Exposition:
    return current if isinstance(current, Exposition) else Exposition(current)


@functools.lru_cache(maxsize=NEGOTIATED)
def negotiate(accept: str) -> tuple[str, str]:
    """The format (`TEXT` or `OPENMETRICS`) and Content-Type to answer an Accept header with:
    the supported media range with the highest q (the first listed among equals); classic
    text when none is supported or the best is `*/*`."""
    best: tuple[float, str, str] | None = None
    for item in accept.split(","):
        media, _, rest = item.partition(";")
        params = _params(rest)
        q = _quality(params.get("q", "1"))
        answer = _answer(media.strip().lower(), params)
        if answer is not None and q > 0 and (best is None or q > best[0]):
            best = (q, *answer)
    return (best[1], best[2]) if best else (TEXT, CONTENT_TYPE)


def _answer(media: str, params: dict[str, str]) -> tuple[str, str] | None:
    """What one media range is answered with, or None when we cannot serve it."""
    version = params.get("version")
    escaping = params.get("escaping", "underscores")
    if escaping not in _ESCAPINGS:
        escaping = "underscores"
    if media in ("application/openmetrics-text", "application/*"):
        if version not in (None, "1.0.0", "0.0.1"):
            return None
        content_type = openmetrics.CONTENT_TYPE.replace("1.0.0", version or "1.0.0")
        return OPENMETRICS, f"{content_type}; escaping={escaping}"
    if media in ("text/plain", "text/*", "*/*"):
        if version == "1.0.0":  # the same bytes: 1.0.0 differs only for non-legacy names
            return TEXT, f"text/plain; version=1.0.0; charset=utf-8; escaping={escaping}"
        if version in (None, "0.0.4"):
            return TEXT, CONTENT_TYPE
    return None


def _params(text: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in text.split(";"):
        key, eq, value = pair.partition("=")
        if eq:
            params[key.strip().lower()] = value.strip().strip('"')
    return params


def _quality(text: str) -> float:
    try:
        q = float(text)
    except ValueError:
        return 0.0
    return q if 0.0 <= q <= 1.0 else 0.0


async def _authenticate(auth: BasicAuthenticator, request: Request) -> Response | None:
    """None when the request may have `/metrics`, else the refusal to send."""
    try:
        allowed = await auth.check(
            request.headers.get("authorization"), peer=request.peer, opened=request.opened
        )
    except AuthBusy as busy:
        return Response(busy.status, f"{busy}\n".encode(), (_TEXT, ("Retry-After", "1")))
    if allowed:
        return None
    # exporter-toolkit's refusal body (Go's `http.StatusText(401)`), which dcgm-exporter's own
    # basic-auth test looks for
    return Response(401, b"Unauthorized\n", (_TEXT, _UNAUTHORIZED))


async def _close(authenticator: BasicAuthenticator | None) -> None:
    if authenticator is not None:
        await asyncio.to_thread(authenticator.close)  # waits for a bcrypt check in progress


@functools.lru_cache(maxsize=NEGOTIATED)
def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding value allows gzip (`gzip`, `*`, not `gzip;q=0`)."""
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        q = params.strip().replace(" ", "").lower()
        return not (q.startswith("q=") and _is_zero(q[2:]))
    return False


def _is_zero(text: str) -> bool:
    try:
        return float(text) == 0.0
    except ValueError:
        return False
