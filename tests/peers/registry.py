"""A real OCI registry for the release path: Debian's `docker-registry`, the CNCF distribution
server, on loopback with its storage in a temporary folder.

It serves plain HTTP on 127.0.0.1, which dockerd accepts for a loopback registry without TLS
and Helm reaches with `plain_http`. No authentication is configured: every pull the tests make
is anonymous, as a user's `helm install` or a node's image pull from a public package is.
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.peers.ports import free_port
from tests.peers.runtime import require_binary

# The manifest types a pull asks for: an image (Docker's or OCI's, single or multi-platform)
# or a Helm chart (an OCI image manifest whose config is the chart's).
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
)


@dataclass(frozen=True)
class Manifest:
    """What an anonymous GET of a manifest answered."""

    status: int
    digest: str  # the Docker-Content-Digest header
    media_type: str
    body_digest: str  # sha256 of the bytes received


@dataclass(frozen=True)
class Registry:
    address: str  # 127.0.0.1:PORT
    log: Path

    def manifest(self, repository: str, reference: str) -> Manifest:
        """GET /v2/<repository>/manifests/<tag or digest>, with no credentials."""
        request = urllib.request.Request(
            f"http://{self.address}/v2/{repository}/manifests/{reference}",
            headers={"Accept": MANIFEST_TYPES},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = answer.read()
                return Manifest(
                    status=answer.status,
                    digest=answer.headers.get("Docker-Content-Digest", ""),
                    media_type=answer.headers.get("Content-Type", ""),
                    body_digest="sha256:" + hashlib.sha256(body).hexdigest(),
                )
        except urllib.error.HTTPError as error:
            return Manifest(error.code, "", "", "")


def _config(root: Path, address: str) -> str:
    return (
        "version: 0.1\n"
        "log:\n  level: info\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: {address}\n"
    )


@contextlib.contextmanager
def registry(root: Path, timeout: float = 30.0) -> Iterator[Registry]:
    """A started registry, stopped (by its pid) on exit. Ready once it logs that it listens."""
    binary = require_binary("docker-registry")
    root.mkdir(parents=True, exist_ok=True)
    address = f"127.0.0.1:{free_port()}"
    config = root / "config.yml"
    config.write_text(_config(root, address))
    log = root / "registry.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + timeout
        while f'msg="listening on {address}"' not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"docker-registry did not listen on {address} (exit={proc.poll()}):\n"
                    + log.read_text(errors="replace")[-3000:]
                )
            time.sleep(0.05)
        yield Registry(address, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
