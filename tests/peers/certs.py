"""Certificates for the TLS tests: a self-signed one (its own CA) or one a test CA signed, for a
server on `localhost`/127.0.0.1 or for a client, with their keys as PEM."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes
    _cert: Any
    _key: Any


def issue(
    common_name: str = "localhost",
    *,
    signer: Issued | None = None,
    ca: bool = False,
    client: bool = False,
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
) -> Issued:
    """A certificate for `common_name`, signed by `signer` (self-signed without one).

    A CA (`ca=True`) may sign others and names no host; anything else is a server certificate
    for `hosts` (DNS names and IP addresses; localhost and 127.0.0.1 unless told), or a client
    one (`client=True`). A self-signed leaf is also marked as a CA, so that it can be trusted
    as its own root."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(signer._cert.subject if signer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if ca:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=0), critical=True
        ).add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        if not client:
            names = [_subject_alt_name(x509, host) for host in hosts]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(
            x509.BasicConstraints(ca=signer is None, path_length=None), critical=True
        ).add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    cert = builder.sign(signer._key if signer else key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return Issued(cert.public_bytes(serialization.Encoding.PEM), key_pem, cert, key)


def _subject_alt_name(x509: Any, host: str) -> Any:
    """A SAN entry: an IPAddress for an address, a DNSName otherwise."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
