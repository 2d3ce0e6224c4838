"""The client TLS context both OTLP transports build from their `tls` settings."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from otelgpu.configgrpc import Credentials
from otelgpu.exporters.otlp.config import ClientTLSConfig

T = TypeVar("T")

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
    import tempfile  # only for PEM text (`tempfile` brings `shutil` and `random` with it)

    with tempfile.TemporaryDirectory(prefix="otelgpu-tls-") as directory:  # mode 0700
        cert = tls.cert_file or _write(Path(directory, "cert.pem"), tls.cert_pem)
        key = tls.key_file or _write(Path(directory, "key.pem"), tls.key_pem_text())
        context.load_cert_chain(cert, key)


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def grpc_credentials(tls: ClientTLSConfig) -> Credentials:
    """The `tls` settings as grpcio credentials (PEM bytes). With no CA set, the system's
    bundle (the same roots `ssl` uses), else grpcio's own. grpcio negotiates TLS 1.2 or 1.3;
    it has no setting for the version range."""
    roots = _pem(tls.ca_file, tls.ca_pem) or _system_roots()
    chain = _pem(tls.cert_file, tls.cert_pem)
    key = _pem(tls.key_file, tls.key_pem_text())
    return Credentials(roots, chain, key, tls.server_name_override)


async def presented_certificate(host: str, port: int, server_name: str, timeout: float) -> bytes:
    """The certificate the server presents, as PEM, read without checking it: what
    `insecure_skip_verify` trusts on a gRPC channel, since grpcio cannot skip verification."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    der = await _handshake(
        host, port, context, server_name, timeout, lambda peer: peer.getpeercert(True)
    )
    if not der:
        raise ssl.SSLError(f"{host}:{port} presented no certificate")
    return ssl.DER_cert_to_PEM_cert(der).encode()


async def certificate_names(
    host: str, port: int, pem: bytes, server_name: str, timeout: float
) -> list[str]:
    """The DNS and IP names in a self-signed certificate the server presents, read by a
    handshake that trusts that certificate alone; [] when it is not self-signed (the
    handshake then fails: a CA must be configured)."""
    context = ssl.create_default_context(cadata=pem.decode())
    context.check_hostname = False
    try:
        found = await _handshake(
            host, port, context, server_name, timeout, ssl.SSLObject.getpeercert
        )
    except (ssl.SSLError, OSError, TimeoutError):
        return []
    cert: dict[str, Any] = dict(found or {})  # typeshed's value types are looser than the API
    names = [v for k, v in cert.get("subjectAltName", ()) if k in ("DNS", "IP Address")]
    for rdn in cert.get("subject", ()):
        names += [v for k, v in rdn if k == "commonName"]
    return names


async def _handshake(
    host: str,
    port: int,
    context: ssl.SSLContext,
    server_name: str,
    timeout: float,
    read: Callable[[ssl.SSLObject], T],
) -> T | None:
    """`read` of the TLS object of one handshake (ALPN h2, as gRPC's) and nothing more; None
    when the connection has none."""
    context.set_alpn_protocols(["h2"])
    async with asyncio.timeout(timeout):
        _, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=server_name or host
        )
    try:
        peer: ssl.SSLObject | None = writer.get_extra_info("ssl_object")
        return read(peer) if peer is not None else None
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


def _pem(path: str, text: str) -> bytes | None:
    if path:
        return Path(path).read_bytes()
    return text.encode() if text else None


def _system_roots() -> bytes | None:
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            return Path(candidate).read_bytes()
    return None
