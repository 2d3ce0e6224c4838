"""The `otlp_http` exporter's transport: binary protobuf POSTed with an aiohttp session.

opentelemetry-exporter-otlp-proto-http is built on blocking `requests`, which would stall the
event loop, so the request body is the exporter's own encoding (`encode.encode_bytes`) and
only the HTTP client is aiohttp.

Proxies: `proxy_url` when set, else the one the environment names for the endpoint, chosen
once in `open` by the rules of Go's net/http (`proxy_for`), which the Collector's exporters
follow. aiohttp's own `trust_env` is not used: it also reads `~/.netrc` for every request (in
a worker thread) and refuses a request whose `Authorization` header meets a netrc entry for
the host.
"""

from __future__ import annotations

import base64
import email.utils
import gzip
import ipaddress
import os
import ssl
import time
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceResponse,
)

from otelgpu.component.errors import ExportError
from otelgpu.exporters.otlp.config import OtlpHttpExporterConfig
from otelgpu.exporters.otlp.exporter import ExportResponse
from otelgpu.exporters.otlp.tls import ssl_context

# The OTLP/HTTP specification's retryable statuses; every other error status is permanent.
RETRYABLE = frozenset({429, 502, 503, 504})
_PROTOBUF = "application/x-protobuf"
# gzip's default level 9 costs several times level 6 for a few percent on metric payloads.
_GZIP_LEVEL = 6


class HttpTransport:
    """POSTs each request to `<endpoint>/v1/metrics` over one pooled session, through the
    proxy configured or named by `environ` (default: the process's environment)."""

    def __init__(
        self, config: OtlpHttpExporterConfig, *, environ: Mapping[str, str] | None = None
    ) -> None:
        self._config = config
        self._environ = environ
        self._url = config.url()
        self._gzip = config.compression == "gzip"
        self._headers = {k: v for k, v in config.header_items()}
        self._headers["Content-Type"] = _PROTOBUF
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._session: aiohttp.ClientSession | None = None
        # The name the server's certificate is checked against, and sent in SNI.
        self._server_name = config.tls.server_name_override or None
        self._proxy: str | None = None  # without its credentials: those go in the header
        self._proxy_headers: dict[str, str] | None = None

    async def open(self) -> None:
        tls: ssl.SSLContext | bool = True
        if self._url.startswith("https://"):
            tls = ssl_context(self._config.tls)
        environ = os.environ if self._environ is None else self._environ
        proxy = self._config.proxy_url or proxy_for(self._url, environ)
        if proxy:
            self._proxy, credentials = _proxy_credentials(proxy)
            if credentials is not None:
                # https: in the CONNECT that opens the tunnel; http: in each request, which
                # the proxy reads (and removes) before passing it on.
                header = {"Proxy-Authorization": credentials}
                if self._url.startswith("https://"):
                    self._proxy_headers = header
                else:
                    self._headers |= header
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls))

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        if self._session is None:
            raise ExportError("the HTTP session is not open", retryable=False)
        body = request
        if self._gzip:
            body = gzip.compress(body, compresslevel=_GZIP_LEVEL, mtime=0)
        try:
            async with self._session.post(
                self._url,
                data=body,
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
                server_hostname=self._server_name,
                proxy=self._proxy,
                proxy_headers=self._proxy_headers,
            ) as response:
                payload = await response.read()
                status, retry_after = response.status, response.headers.get("Retry-After")
        except (TimeoutError, aiohttp.ClientError) as err:
            # Connection refused, reset or timed out: the endpoint may well come back.
            raise ExportError(
                f"POST {self._url}: {type(err).__name__} {err}", retryable=True
            ) from None
        if 200 <= status < 300:
            return _accepted(payload)
        raise ExportError(
            f"POST {self._url}: HTTP {status}{_status_message(payload)}",
            retryable=status in RETRYABLE,
            retry_after=parse_retry_after(retry_after) if status in RETRYABLE else None,
        )

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _accepted(payload: bytes) -> ExportResponse:
    try:
        partial = ExportMetricsServiceResponse.FromString(payload).partial_success
    except Exception:  # a 2xx with a body we cannot read still means "accepted"
        return ExportResponse()
    return ExportResponse(partial.rejected_data_points, partial.error_message)


def _status_message(payload: bytes) -> str:
    """`: <message>` from a google.rpc.Status error body, or nothing."""
    try:
        message = Status.FromString(payload).message
    except Exception:  # not protobuf (a proxy's HTML page): say nothing rather than guess
        return ""
    return f": {message[:200]}" if message else ""


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delay-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def proxy_for(url: str, environ: Mapping[str, str]) -> str:
    """The proxy the environment names for `url`, or "" for none, by the rules of Go's
    net/http (`httpproxy.FromEnvironment`): `HTTPS_PROXY` for an https URL, `HTTP_PROXY` for
    an http one (each also in lower case); none for `localhost` and loopback addresses, nor
    for a host `NO_PROXY` matches. A proxy given without a scheme is an http:// one."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    proxy = _variable(environ, "HTTPS_PROXY" if https else "HTTP_PROXY")
    host = (parts.hostname or "").lower()
    if not (proxy and host):
        return ""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if host == "localhost" or (address is not None and address.is_loopback):
        return ""
    port = parts.port or (443 if https else 80)
    if _bypassed(host, address, port, _variable(environ, "NO_PROXY")):
        return ""
    return proxy if "://" in proxy else f"http://{proxy}"


def _variable(environ: Mapping[str, str], name: str) -> str:
    return (environ.get(name) or environ.get(name.lower()) or "").strip()


def _bypassed(
    host: str,
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    port: int,
    no_proxy: str,
) -> bool:
    """Whether a `NO_PROXY` entry matches: `*` (every host), an IP address or CIDR block
    (IP hosts), a domain (that name and its subdomains; with a leading `.` or `*.`, its
    subdomains only), each optionally with `:port`."""
    for entry in no_proxy.lower().split(","):
        entry = entry.strip()
        if entry == "*":
            return True
        if not entry:
            continue
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, wanted = _split_port(entry)
        if wanted is not None and wanted != port:
            continue
        try:
            if address is not None and address == ipaddress.ip_address(name):
                return True
        except ValueError:
            pass
        if name.startswith("*."):
            name = name[1:]
        if name.startswith("."):  # subdomains only
            if host.endswith(name):
                return True
        elif host == name or host.endswith("." + name):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """A `NO_PROXY` entry as (host, port or None); IPv6 addresses with or without brackets."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest[1:].isdigit() else None
    head, colon, tail = entry.rpartition(":")
    if colon and tail.isdigit() and ":" not in head:
        return head, int(tail)
    return entry, None


def _proxy_credentials(proxy: str) -> tuple[str, str | None]:
    """The proxy URL without its user info, and the `Proxy-Authorization` value (Basic) that
    info makes, if any."""
    parts = urlsplit(proxy)
    if parts.username is None:
        return proxy, None
    user_pass = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return bare, "Basic " + base64.b64encode(user_pass.encode()).decode("ascii")
