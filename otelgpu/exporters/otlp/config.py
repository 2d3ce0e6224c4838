"""Configuration of the `otlp` (gRPC) and `otlp_http` exporters.

The option names and defaults are the Collector's (`exporterhelper`, `configretry`,
`configtls`), so a pipeline file written for `otelcol` reads the same here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, PlainSerializer, SecretStr, field_validator, model_validator

from otelgpu.config.types import PositiveDuration, StrictModel
from otelgpu.exporterhelper.config import QueueConfig, RetryConfig

# Header values are credentials (API keys, bearer tokens): pydantic keeps them out of reprs and
# print-config shows the Collector's `[REDACTED]` marker instead of the value.
HeaderValue = Annotated[SecretStr, PlainSerializer(lambda _: "[REDACTED]", return_type=str)]


# A PEM private key is a secret: kept out of reprs, `[REDACTED]` in print-config.
SecretPem = Annotated[
    SecretStr,
    PlainSerializer(lambda v: "[REDACTED]" if v.get_secret_value() else "", return_type=str),
]
TLSVersion = Literal["1.0", "1.1", "1.2", "1.3"]


def redact_password(url: str) -> str:
    """`url` with the password of its user info (a proxy's credentials) replaced by the
    Collector's `[REDACTED]` marker; also in a URL without a scheme."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.partition(':')[0]}:[REDACTED]@{host}{slash}{path}"


# A proxy URL may carry credentials: print-config shows its password as `[REDACTED]`.
ProxyURL = Annotated[str, PlainSerializer(redact_password, return_type=str)]


class ClientTLSConfig(StrictModel):
    """What both exporters' `tls` share (the Collector's `configtls` client options).

    ca_file / ca_pem: the CA bundle that signs the server's certificate, as a path or as PEM
    text (default: the system roots). cert_file / cert_pem and key_file / key_pem: the client
    certificate and key for mutual TLS; set both or neither. Each path and its `_pem` form
    exclude each other. min_version: "1.2" (default), max_version: "" (the newest); see each
    exporter for what it can do.
    server_name_override: the name the server's certificate is checked against (and sent in
    SNI) instead of the endpoint's host. insecure_skip_verify: accept any server certificate.
    """

    ca_file: str = ""
    ca_pem: str = ""
    cert_file: str = ""
    cert_pem: str = ""
    key_file: str = ""
    key_pem: SecretPem = SecretStr("")
    min_version: TLSVersion = "1.2"
    max_version: TLSVersion | Literal[""] = ""
    server_name_override: str = ""
    insecure_skip_verify: bool = False

    @model_validator(mode="after")
    def _sources(self) -> ClientTLSConfig:
        if self.max_version and self.max_version < self.min_version:
            raise ValueError("max_version must not be lower than min_version")
        for name in ("ca", "cert", "key"):
            if getattr(self, f"{name}_file") and self.has_pem(name):
                raise ValueError(f"set {name}_file or {name}_pem, not both")
        if bool(self.cert_file or self.cert_pem) != bool(self.key_file or self.has_pem("key")):
            raise ValueError(
                "a client certificate and its key must be set together (mutual TLS): "
                "cert_file or cert_pem with key_file or key_pem"
            )
        return self

    def has_pem(self, name: str) -> bool:
        value = getattr(self, f"{name}_pem")
        return bool(value.get_secret_value() if isinstance(value, SecretStr) else value)

    def key_pem_text(self) -> str:
        """The PEM key revealed, for the transport only."""
        return self.key_pem.get_secret_value()


class TLSConfig(ClientTLSConfig):
    """`tls` of the `otlp` exporter.

    insecure: plaintext gRPC (no TLS at all); default false, as in the Collector.
    min_version: "1.0", "1.1" or "1.2" all mean TLS 1.2 or later here, because gRPC runs on
    HTTP/2, which needs 1.2; "1.3" is enforced. max_version "1.0" or "1.1" is refused for the
    same reason. insecure_skip_verify: accept any server certificate (as in the Collector).
    """

    insecure: bool = False

    @model_validator(mode="after")
    def _http2_can(self) -> TLSConfig:
        if self.max_version in ("1.0", "1.1"):
            raise ValueError(
                f"max_version {self.max_version} is below what gRPC can use: it runs on "
                "HTTP/2, which needs TLS 1.2 or later"
            )
        return self


class HttpTLSConfig(ClientTLSConfig):
    """`tls` of the `otlp_http` exporter; whether TLS is used at all follows the endpoint's
    scheme (`https://` or `http://`), as in the Collector. Every option is honoured; a
    min_version below 1.2 may still be refused by the system's OpenSSL security level.

    insecure: accepted, as Collector files write it for `http://` endpoints; the scheme
    decides (an `https://` endpoint is still verified, as the Collector's HTTP client does).
    """

    insecure: bool = False


class OtlpCommonConfig(StrictModel):
    """Options both transports share (see the two exporter configs)."""

    headers: dict[str, HeaderValue] = Field(default_factory=dict)
    compression: Literal["gzip", "none"] = "gzip"
    timeout: PositiveDuration = 5.0
    retry_on_failure: RetryConfig = Field(default_factory=RetryConfig)
    sending_queue: QueueConfig = Field(default_factory=QueueConfig)

    def header_items(self) -> list[tuple[str, str]]:
        """The headers with their secret values revealed, for the transport only."""
        return [(k, v.get_secret_value()) for k, v in self.headers.items()]

    def backend(self) -> str:
        """Where the requests go (the endpoint, as configured)."""
        return str(getattr(self, "endpoint", ""))


class OtlpExporterConfig(OtlpCommonConfig):
    """`exporters::otlp` (OTLP over gRPC).

    endpoint: `host:port` of the OTLP gRPC receiver (default `localhost:4317`); an `http://`
    prefix means plaintext, `https://` means TLS, whatever `tls::insecure` says.
    tls: see `TLSConfig`. headers: gRPC metadata sent with every request (values are secrets).
    compression: gzip | none (gzip). timeout: per request (5s).
    retry_on_failure, sending_queue: see their models.
    """

    endpoint: str = "localhost:4317"
    tls: TLSConfig = Field(default_factory=TLSConfig)

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if sep and scheme not in ("http", "https"):
            raise ValueError(f'endpoint "{value}": the scheme must be http:// or https://')
        host, _, port = (rest if sep else value).rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f'endpoint "{value}": expected host:port, such as localhost:4317')
        return value

    def config_warnings(self) -> tuple[tuple[tuple[str | int, ...], str], ...]:
        """A TLS version range grpcio cannot hold to: it negotiates TLS 1.2 or 1.3 with the
        server whatever the range says (plaintext channels have no TLS to bound)."""
        _, plaintext = self.target()
        tls = self.tls
        if plaintext or not (tls.min_version == "1.3" or tls.max_version == "1.2"):
            return ()
        key = "min_version" if tls.min_version == "1.3" else "max_version"
        message = (
            f"tls::min_version {tls.min_version} / max_version {tls.max_version or '(none)'} "
            "cannot be enforced on gRPC: grpcio negotiates TLS 1.2 or 1.3 with the server"
        )
        return ((("tls", key), message),)

    def target(self) -> tuple[str, bool]:
        """The gRPC target (`host:port`) and whether the channel is plaintext."""
        scheme, sep, rest = self.endpoint.partition("://")
        if not sep:
            return self.endpoint, self.tls.insecure
        return rest, scheme == "http"


class OtlpHttpExporterConfig(OtlpCommonConfig):
    """`exporters::otlp_http` (OTLP over HTTP, binary protobuf).

    endpoint: base URL of the receiver (default `http://localhost:4318`); requests go to
    `<endpoint>/v1/metrics` unless `metrics_endpoint` names the full URL.
    proxy_url: the HTTP proxy every request goes through (`http://` or `https://`, with
    `user:password@` for Basic proxy authentication), as the Collector's confighttp names it;
    empty (the default): the proxy the environment names, read as Go's net/http (and so the
    Collector) reads it: `HTTPS_PROXY` for an `https://` endpoint, `HTTP_PROXY` for an
    `http://` one, none for localhost, loopback addresses and the hosts `NO_PROXY` matches.
    tls: see `HttpTLSConfig`. headers: HTTP headers sent with every request (values are
    secrets). compression: gzip | none (gzip). timeout: per request (5s).
    retry_on_failure, sending_queue: see their models.
    """

    endpoint: str = "http://localhost:4318"
    metrics_endpoint: str = ""
    proxy_url: ProxyURL = ""
    tls: HttpTLSConfig = Field(default_factory=HttpTLSConfig)

    @model_validator(mode="before")
    @classmethod
    def _encoding(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("encoding", "proto") != "proto":
            raise ValueError(
                f'encoding: "{data["encoding"]}" is not supported: requests are sent as binary '
                "protobuf (the Collector's default, encoding: proto); every OTLP/HTTP receiver "
                "accepts it"
            )
        if isinstance(data, dict) and "encoding" in data:
            data = {k: v for k, v in data.items() if k != "encoding"}
        return data

    @field_validator("endpoint", "metrics_endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        if value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f'"{value}": expected an http:// or https:// URL')
        return value

    @field_validator("proxy_url")
    @classmethod
    def _proxy(cls, value: str) -> str:
        if value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f'"{redact_password(value)}": expected an http:// or https:// URL of a proxy'
                )
        return value

    def url(self) -> str:
        """The URL metrics are POSTed to."""
        return self.metrics_endpoint or self.endpoint.rstrip("/") + "/v1/metrics"
