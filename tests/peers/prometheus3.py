"""A Prometheus 3.x server binary (and its promtool) for tests, from Debian sid (no registry carries one else).

Debian bookworm (the system's apt source) ships Prometheus 2.42 only; sid ships 3.x
(3.5.3+ds1-6 when this was written). The packages are downloaded with apt-get into a private
prefix (their own sources list, lists and cache: the system's apt configuration and dpkg
database are untouched), checked by apt against Debian's archive keyring, and unpacked with
`dpkg-deb -x`. The binary needs only libc 2.34+ (bookworm has 2.36).

Needs: `apt-get`, `apt-cache`, `dpkg-deb`, `/usr/share/keyrings/debian-archive-keyring.gpg`
and HTTP access to deb.debian.org (about 250 MB with the package lists, about 20 s), once:
the result is cached under `~/.cache/otelgpu-test/prometheus3` (or `$OTELGPU_PROMETHEUS3_DIR`).
`PROM3_DEB_VERSION` pins a package version; by default sid's candidate, refused unless 3.x.
When any step fails the test fails with the reason (PEERS.md: never skipped).

The Debian build has no web UI and no OTLP receiver; scraping and the HTTP API work.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

_SOURCE = (
    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
    "http://deb.debian.org/debian sid main\n"
)
_PACKAGES = ("prometheus", "promtool")


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "otelgpu-test" / "prometheus3"
    return Path(os.environ.get("OTELGPU_PROMETHEUS3_DIR", default))


def prometheus3_binary() -> str:
    """The Prometheus 3.x server binary, installed into the cache on first use; raises with
    what failed and what the install needs when it cannot be had."""
    prefix = cache_dir()
    binary = prefix / "root" / "usr" / "bin" / "prometheus"
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers install once
        if not _is_v3(binary):
            try:
                _install(prefix)
            except (OSError, subprocess.CalledProcessError) as exc:
                detail = getattr(exc, "stderr", "") or ""
                raise RuntimeError(
                    f"cannot install Prometheus 3 from Debian sid into {prefix}: {exc} {detail}\n"
                    "this test needs apt-get, dpkg-deb, debian-archive-keyring and HTTP access to "
                    "deb.debian.org (see tests/peers/prometheus3.py)"
                ) from exc
        if not _is_v3(binary):
            raise RuntimeError(f"{binary} is not a Prometheus 3.x server after installing it")
    return str(binary)


def promtool3_binary() -> str:
    """The promtool of the same Prometheus 3.x packages (installed with the server)."""
    promtool = Path(prometheus3_binary()).with_name("promtool")
    result = subprocess.run([promtool, "--version"], capture_output=True, text=True, check=False)
    if result.returncode != 0 or "promtool, version 3." not in result.stdout:
        raise RuntimeError(f"{promtool} is not a Prometheus 3.x promtool: {result.stdout}")
    return str(promtool)


def _is_v3(binary: Path) -> bool:
    if not os.access(binary, os.X_OK):
        return False
    result = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return result.returncode == 0 and "prometheus, version 3." in result.stdout


def _install(prefix: Path) -> None:
    apt = prefix / "sid-apt"
    debs = apt / "debs"
    for path in (apt / "lists" / "partial", apt / "cache" / "archives" / "partial", debs):
        path.mkdir(parents=True, exist_ok=True)
    (apt / "sid.list").write_text(_SOURCE)
    options = [
        *("-o", f"Dir::Etc::sourcelist={apt / 'sid.list'}"),
        *("-o", "Dir::Etc::sourceparts=/nonexistent"),
        *("-o", f"Dir::State::Lists={apt / 'lists'}"),
        *("-o", f"Dir::Cache={apt / 'cache'}"),
        *("-o", "APT::Sandbox::User=root"),
    ]
    _run("apt-get", *options, "-qq", "update")
    version = os.environ.get("PROM3_DEB_VERSION") or _candidate(options)
    if not version.startswith("3."):
        raise RuntimeError(f"Debian sid's prometheus candidate is {version!r}, not 3.x")
    _run("apt-get", *options, "-qq", "download", *(f"{p}={version}" for p in _PACKAGES), cwd=debs)
    for package in _PACKAGES:
        [deb] = debs.glob(f"{package}_{version.split(':')[-1]}_*.deb")
        _run("dpkg-deb", "-x", str(deb), str(prefix / "root"))


def _candidate(options: list[str]) -> str:
    policy = _run("apt-cache", *options, "policy", "prometheus")
    for line in policy.splitlines():
        if line.strip().startswith("Candidate:"):
            return line.split(":", 1)[1].strip()
    return "(none)"


def _run(*args: str, cwd: Path | None = None) -> str:
    result = subprocess.run(args, capture_output=True, text=True, check=True, cwd=cwd)
    return result.stdout
