"""What the `/metrics` auth tests share: the scrape password and its (cheap) bcrypt hash, a
small body to serve, the Basic header, a prepared checker for that password, and a gate that
holds bcrypt checks until a test lets them run."""

from __future__ import annotations

import asyncio
import base64
import gzip
import threading
import time
from collections.abc import Callable

import bcrypt
import pytest

from otelgpu.exporters.prometheus import auth
from otelgpu.exporters.prometheus.auth import BasicAuthenticator
from otelgpu.exporters.prometheus.config import BasicAuthConfig
from otelgpu.exporters.prometheus.render import Body

PASSWORD = "s3cret-scrape"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
BODY = Body(b"up 1\n", gzip.compress(b"up 1\n"), 1)


def basic(user: str, password: str) -> str:
    """The `Authorization` header value for `user:password`."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def prepared_checker() -> BasicAuthenticator:
    """A checker for user `prom` with `PASSWORD`, prepared (its caller closes it)."""
    checker = BasicAuthenticator(BasicAuthConfig(username="prom", password_hash=HASH))  # type: ignore[arg-type]
    await checker.prepare()
    return checker


DEADLINE = 30.0


async def until(condition: Callable[[], bool], what: str) -> None:
    """Returns once `condition()` holds (looked at every 10 ms); fails the test after
    `DEADLINE` seconds."""
    give_up = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > give_up:
            pytest.fail(f"still waiting, after {DEADLINE:.0f} s, for {what}")
        await asyncio.sleep(0.01)


class Gate:
    """bcrypt that records each password it is asked about and runs only while open."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[bytes] = []
        self.open = threading.Event()
        self.open.set()
        self.held = 0  # checks in the gate now, waiting for it to open (0 or 1)

        def gated(password: bytes, hashed: bytes) -> bool:
            self.calls.append(password)
            self.held += 1
            self.open.wait(2 * DEADLINE)  # a safety net: `until` gives up first
            self.held -= 1
            return bcrypt.checkpw(password, hashed)

        monkeypatch.setattr(auth, "_checkpw", gated)
