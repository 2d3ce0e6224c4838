"""A reload's new health_check extension takes the old one's port over and answers for its host."""

from __future__ import annotations

import dataclasses
import socket

import aiohttp

from otelgpu.component.component import Kind
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.extensions.health_check.config import HealthCheckExtensionConfig
from otelgpu.extensions.health_check.extension import HealthCheckExtension
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.peers.ports import free_port


def make(telemetry: SelfTelemetry, listeners: KeptListeners, port: int) -> HealthCheckExtension:
    settings = make_settings("health_check", Kind.EXTENSION, telemetry)
    return HealthCheckExtension(
        dataclasses.replace(settings, listeners=listeners),
        HealthCheckExtensionConfig(endpoint=f"127.0.0.1:{port}"),
    )


async def get(port: int, path: str) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status


async def test_the_port_stays_open_and_readiness_follows_the_new_host(
    telemetry: SelfTelemetry,
) -> None:
    listeners, port = KeptListeners(), free_port()
    old_host, new_host = FakeHost(telemetry), FakeHost(telemetry)
    new_host.ready = False
    old = make(telemetry, listeners, port)
    await old.start(old_host)
    await old.shutdown()
    assert await get(port, "/healthz") == 200  # parked, still answering
    new = make(telemetry, listeners, port)
    await new.start(new_host)
    try:
        assert listeners.ports == []
        assert await get(port, "/readyz") == 503  # the new host's answer, not the old one's
        new_host.ready = True
        assert await get(port, "/readyz") == 200
    finally:
        await new.shutdown()
        await listeners.close_all()
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        closed = False
    except ConnectionRefusedError:
        closed = True
    assert closed
