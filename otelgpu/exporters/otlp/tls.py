"""The client TLS context both OTLP transports build from their `tls` settings."""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path

from otelgpu.exporters.otlp.config import ClientTLSConfig

_TLS_VERSIONS = {
    "1.0": ssl.TLSVersion.TLSv1,
    "1.1": ssl.TLSVersion.TLSv1_1,
    "1.2": ssl.TLSVersion.TLSv1_2,
    "1.3": ssl.TLSVersion.TLSv1_3,
}


def ssl_context(tls: ClientTLSConfig, *, floor: str = "1.0") -> ssl.SSLContext:
    """The client TLS context (`min_version` or later, and never below `floor`) for an
    https:// or gRPC endpoint."""
    context = ssl.create_default_context(cafile=tls.ca_file or None, cadata=tls.ca_pem or None)
    context.minimum_version = _TLS_VERSIONS[max(tls.min_version, floor)]
    if tls.max_version:
        context.maximum_version = _TLS_VERSIONS[tls.max_version]
    if tls.cert_file or tls.cert_pem:
        _load_client_cert(context, tls)
    if tls.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _load_client_cert(context: ssl.SSLContext, tls: ClientTLSConfig) -> None:
    """Loads the client certificate and key; `ssl` reads them from files only, so PEM text
    is written to a private temporary directory for the call and removed right after."""
    if not (tls.cert_pem or tls.has_pem("key")):
        context.load_cert_chain(tls.cert_file, tls.key_file)
        return
    with tempfile.TemporaryDirectory(prefix="otelgpu-tls-") as directory:  # mode 0700
        cert = tls.cert_file or _write(Path(directory, "cert.pem"), tls.cert_pem)
        key = tls.key_file or _write(Path(directory, "key.pem"), tls.key_pem_text())
        context.load_cert_chain(cert, key)


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)
