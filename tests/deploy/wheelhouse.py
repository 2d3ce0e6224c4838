"""The wheels the image build installs, fetched by the host's pip and served on loopback.

Inside the test build there is no PyPI: the sandbox's TLS goes through a proxy whose CA only
the host trusts, and baking that CA into the image would change what is published. So the
host's pip (which does reach PyPI) downloads every dependency as a wheel, for CPython 3.11
on manylinux, into a cached folder named by a hash of pyproject's dependency list; a tiny
HTTP server on 127.0.0.1 serves it; the build gets `PIP_NO_INDEX=1` and `PIP_FIND_LINKS`
(the Dockerfile's build stage declares both, for anyone with a mirror or a wheelhouse).

The same download with another `--platform` is how tests show that arm64 resolves every
dependency as a wheel (no compiler in a multi-arch build).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

from tests.deploy import base_image
from tests.deploy.tools import ROOT

# What `pip install .` needs beyond the dependencies: the build backend (pyproject's
# build-system.requires) and pip's own wheel support.
PYTHON = "3.11"
MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}


def platforms(arch: str) -> list[str]:
    """Every manylinux tag Debian bookworm's glibc (2.36) runs, for pip's `--platform`
    (pip matches a given tag exactly, so each one is named)."""
    machine = MACHINES[arch]
    return [f"manylinux_2_{minor}_{machine}" for minor in range(36, 16, -1)]


def requirements() -> list[str]:
    """The project's runtime dependencies and its build requirements, from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [*project["project"]["dependencies"], *project["build-system"]["requires"]]


def download(destination: Path, arch: str) -> subprocess.CompletedProcess[str]:
    """`pip download` of every requirement as a binary wheel for `arch` (never raises)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            *(f"--platform={tag}" for tag in platforms(arch)),
            "--python-version",
            PYTHON,
            "--implementation",
            "cp",
            "--dest",
            str(destination),
            *requirements(),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def cached(arch: str) -> Path:
    """The wheelhouse for `arch`, downloaded once per dependency list."""
    key = hashlib.sha256("\n".join([PYTHON, arch, *requirements()]).encode()).hexdigest()[:12]
    folder = base_image.cache_dir() / f"wheels-{arch}-{key}"
    if (folder / ".complete").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    result = download(folder, arch)
    if result.returncode != 0:
        raise RuntimeError(f"pip download for {arch} failed:\n{result.stderr[-4000:]}")
    (folder / ".complete").write_text("\n".join(requirements()) + "\n")
    return folder


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """Serves `folder`'s listing on 127.0.0.1; yields the URL for PIP_FIND_LINKS."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Keeps pytest's output free of one line per wheel."""
