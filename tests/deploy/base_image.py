"""A local stand-in for the Dockerfile's base image, made without a registry.

No container registry is reachable from CI, but Debian's package mirror is: `debootstrap`
builds a minimal Debian bookworm root filesystem with Python 3.11 (the release line of the
published base, `python:3.11-slim-bookworm`), and `docker import` turns its tarball into an
image that the build receives as `--build-arg BASE_IMAGE=...`.

The tarball is cached under `$OTELGPU_TEST_CACHE` (default `~/.cache/otelgpu-test`) in a file
named by a hash of the recipe below, so it is made once per machine (about a minute) and
a changed recipe makes a new one. Delete the folder to force a rebuild.

    python -m tests.deploy.base_image    # make (or find) the tarball and print its path
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SUITE = "bookworm"
MIRROR = os.environ.get("OTELGPU_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# python3-venv: `python3 -m venv` in the build stage (Debian splits ensurepip out);
# ca-certificates: pip reaches PyPI over TLS.
PACKAGES = ("python3", "python3-venv", "ca-certificates")
# Left out of the tarball: package caches and lists, documentation, translations.
PRUNED = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)
RECIPE = f"debootstrap minbase {SUITE} {' '.join(PACKAGES)} pruned {' '.join(PRUNED)} v1"
IMAGE = "otelgpu-test/debian-python:" + hashlib.sha256(RECIPE.encode()).hexdigest()[:12]


def cache_dir() -> Path:
    return Path(os.environ.get("OTELGPU_TEST_CACHE", Path.home() / ".cache" / "otelgpu-test"))


def tarball_path() -> Path:
    return cache_dir() / f"{IMAGE.rsplit(':', 1)[1]}-{SUITE}-rootfs.tar"


def _debootstrap() -> str:
    found = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if os.access("/usr/sbin/debootstrap", os.X_OK) else None
    )
    if found is None:
        raise RuntimeError(
            "debootstrap is not installed: apt-get install -y debootstrap "
            "(scripts/test installs it); the image test needs it to make its base image"
        )
    return found


def build_tarball() -> Path:
    """The cached rootfs tarball, made with debootstrap if absent (needs root)."""
    target = tarball_path()
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="otelgpu-rootfs-", dir=target.parent) as tmp:
        root = Path(tmp) / "root"
        result = subprocess.run(
            [
                _debootstrap(),
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(root),
                MIRROR,
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if result.returncode != 0:
            log = root / "debootstrap" / "debootstrap.log"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"debootstrap failed:\n{result.stderr[-3000:]}\n{tail}")
        for pruned in PRUNED:
            shutil.rmtree(root / pruned, ignore_errors=True)
        partial = Path(tmp) / "rootfs.tar"
        subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."],
            check=True,
            timeout=300,
        )
        # Renamed into place only when complete: an interrupted run leaves no half tarball.
        partial.replace(target)
    return target


if __name__ == "__main__":
    print(build_tarball())
    sys.exit(0)
