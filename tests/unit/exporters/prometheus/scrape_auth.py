"""What the `/metrics` auth tests share: the scrape password and its (cheap) bcrypt hash, a
small body to serve, the Basic header, and a prepared checker for that password."""

from __future__ import annotations

import base64
import gzip

import bcrypt

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
