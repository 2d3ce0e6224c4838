"""A real Prometheus server for tests, and a self-signed certificate to scrape over TLS.

Prometheus runs as a child process with private TSDB storage in a temporary directory, listens
on a free 127.0.0.1 port, scrapes one target (the agent's `/metrics`), and is queried over its
HTTP API. It is stopped by its pid. A missing binary fails the test (PEERS.md: never skipped).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.peers.certs import issue
from tests.peers.ports import free_port

Result = list[dict[str, Any]]


def prometheus_binary() -> str:
    """The Prometheus server binary; raises with the install hint when it is missing."""
    path = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            "prometheus is not installed: this test needs the real Prometheus server "
            "(apt-get install -y prometheus, see PEERS.md)"
        )
    return path


@dataclass
class Scrape:
    """How Prometheus scrapes the agent."""

    target: str  # host:port
    job: str = "otelgpu"
    scheme: str = "http"
    interval: str = "500ms"
    ca_file: str = ""
    username: str = ""
    password: str = ""


class PrometheusServer:
    """`await start()`, `await query(expr)`, `await wait_for(expr, predicate)`, `stop()`."""

    def __init__(self, root: Path, *scrapes: Scrape, binary: str | None = None) -> None:
        self.root = root
        self.binary = binary  # None: the system's (Debian bookworm: 2.42)
        self.scrapes = scrapes
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / "prometheus.log"
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _config(self) -> dict[str, Any]:
        return {
            "global": {"evaluation_interval": "1m"},
            "scrape_configs": [_job(s) for s in self.scrapes],
        }

    async def start(self, timeout: float = 30.0) -> None:
        """Starts the server and waits until its API answers ready."""
        binary = self.binary or prometheus_binary()
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "prometheus.yml"
        config.write_text(json.dumps(self._config()))  # JSON is YAML
        args = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.root / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self._session = aiohttp.ClientSession()
        deadline = time.monotonic() + timeout
        while not await self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not become ready:\n{self.log_tail()}")
            await asyncio.sleep(0.1)

    async def _ready(self) -> bool:
        assert self._session is not None
        try:
            async with self._session.get(f"{self.url}/-/ready") as response:
                return response.status == 200
        except aiohttp.ClientError:
            return False

    async def query(self, expr: str) -> Result:
        """An instant query's result vector."""
        assert self._session is not None, "start() first"
        async with self._session.get(f"{self.url}/api/v1/query", params={"query": expr}) as r:
            body = await r.json()
        if body.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {body}")
        result: Result = body["data"]["result"]
        return result

    async def targets(self) -> Result:
        """The active targets with their health and last error (for failure messages)."""
        assert self._session is not None
        async with self._session.get(f"{self.url}/api/v1/targets") as r:
            body = await r.json()
        active: Result = body["data"]["activeTargets"]
        return active

    async def wait_for(
        self, expr: str, predicate: Callable[[Result], bool], timeout: float = 20.0
    ) -> Result:
        """Polls `expr` until `predicate(result)` holds; fails with the last result and the
        scrape target's state otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            result = await self.query(expr)
            if predicate(result):
                return result
            if time.monotonic() > deadline:
                targets = await self.targets()
                raise AssertionError(f"{expr!r} never matched; last={result}; targets={targets}")
            await asyncio.sleep(0.2)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    async def stop(self) -> None:
        """Stops the server by its pid (TERM, then KILL after 10 s)."""
        if self._session is not None:
            await self._session.close()
            self._session = None
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            await asyncio.to_thread(proc.wait, 10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            await asyncio.to_thread(proc.wait)


def _job(scrape: Scrape) -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_name": scrape.job,
        "scheme": scrape.scheme,
        "scrape_interval": scrape.interval,
        "scrape_timeout": scrape.interval,
        "static_configs": [{"targets": [scrape.target]}],
    }
    if scrape.ca_file:
        job["tls_config"] = {"ca_file": scrape.ca_file, "server_name": "localhost"}
    if scrape.username:
        job["basic_auth"] = {"username": scrape.username, "password": scrape.password}
    return job


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for `localhost`/127.0.0.1 (its own CA), and its key."""
    issued = issue()
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(issued.cert_pem)
    key_file.write_bytes(issued.key_pem)
    return cert_file, key_file
