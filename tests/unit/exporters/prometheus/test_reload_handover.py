"""A reload's new exporter takes the old one's running server and last body over; its start line
says the listener was kept, and a certificate renewed at the same path is served."""

from __future__ import annotations

import base64
import dataclasses
import logging
import shutil
import socket
import ssl
import threading
from pathlib import Path

import aiohttp
import bcrypt
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.exporters.prometheus.server import OPENMETRICS
from tests.fakes import FakeClock, FakeHost
from tests.peers.ports import free_port
from tests.peers.prometheus import self_signed_cert
from tests.unit.exporters.prometheus.batches import batch, gpu
from tests.unit.exporters.prometheus.test_exporter import LOGGER, served, tls
from tests.unit.exporters.prometheus.translators import nvml_settings


def make(
    telemetry: SelfTelemetry,
    clock: FakeClock,
    listeners: KeptListeners,
    port: int,
    **extra: object,
) -> PrometheusExporter:
    config = PrometheusExporterConfig.model_validate(
        {"endpoint": f"127.0.0.1:{port}", "metric_expiration": "1m", **extra}
    )
    settings = nvml_settings("prometheus", Kind.EXPORTER, telemetry)
    settings = dataclasses.replace(settings, listeners=listeners)
    return PrometheusExporter(settings, config, clock=clock.monotonic, sleep=clock.sleep)


async def scrape(port: int) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        return await response.text()


async def status(port: int, user: str, password: str) -> int:
    header = {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics", headers=header) as response,
    ):
        return response.status


def basic_auth(user: str, password: str) -> dict[str, str]:
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    return {"username": user, "password_hash": hashed}


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


async def _scrape_tls(url: str, context: ssl.SSLContext) -> str:
    async with aiohttp.ClientSession() as session, session.get(url, ssl=context) as response:
        assert response.status == 200
        return await response.text()


async def test_the_new_instance_serves_the_old_body_on_the_same_socket_until_its_own(
    host: FakeHost, clock: FakeClock
) -> None:
    listeners, port = KeptListeners(), free_port()
    old = make(host.telemetry, clock, listeners, port)
    await old.start(host)
    await old.consume(batch(gpu(0), utilization=0.25))
    await old.refresh()
    await old.shutdown()
    assert listeners.ports == [port]
    assert "hw_gpu_utilization_ratio" in await scrape(port)  # parked, still answering

    new = make(host.telemetry, clock, listeners, port)
    await new.start(host)
    try:
        assert listeners.ports == []  # taken back, not bound again
        await clock.advance(30)  # timer renders of an empty store do not replace it
        await new.refresh()
        assert "hw_gpu_utilization_ratio" in await scrape(port)
        await new.consume(batch(gpu(1), utilization=0.75))
        await new.refresh()
        body = await scrape(port)
        assert 'hw_id="GPU-00000001' in body and 'hw_id="GPU-00000000' not in body
    finally:
        await new.shutdown()
        await listeners.close_all()
    assert refused(port)


async def test_the_start_line_says_when_a_reload_kept_the_listener(
    host: FakeHost, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    listeners, port = KeptListeners(), free_port()
    old = make(host.telemetry, clock, listeners, port)
    new = make(host.telemetry, clock, listeners, port)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await old.start(host)
        await old.shutdown()
        await new.start(host)
    try:
        assert served(caplog) == [
            f"serving http://127.0.0.1:{port}/metrics (otel naming)",
            f"serving http://127.0.0.1:{port}/metrics (otel naming)"
            " (listener kept through the reload)",
        ]
    finally:
        await new.shutdown()
        await listeners.close_all()


async def test_an_instance_that_could_not_bind_parks_nothing(
    host: FakeHost, clock: FakeClock
) -> None:
    """A server that never listened is stopped with its password checker's thread, not parked
    for the next instance to take over."""
    listeners = KeptListeners()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        exporter = make(host.telemetry, clock, listeners, port, basic_auth=basic_auth("u", "p"))
        try:
            await exporter.start(host)
        except OSError:
            pass
        else:
            raise AssertionError("bound a port another socket listens on")
        await exporter.shutdown()
    assert listeners.ports == []
    left = [t.name for t in threading.enumerate() if "basic auth" in t.name or f":{port}" in t.name]
    assert left == []


async def test_a_stopped_exporter_leaves_no_password_checker_thread(
    host: FakeHost, clock: FakeClock
) -> None:
    """Stopped for good (no reload to hand its server to), its bcrypt thread ends with it."""
    port = free_port()
    exporter = make(host.telemetry, clock, None, port, basic_auth=basic_auth("u", "p"))  # type: ignore[arg-type]
    await exporter.start(host)
    assert [t for t in threading.enumerate() if t.name.startswith("otelgpu basic auth")]
    await exporter.shutdown()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("otelgpu basic auth")]


async def test_the_old_body_is_given_up_after_metric_expiration(
    host: FakeHost, clock: FakeClock
) -> None:
    listeners, port = KeptListeners(), free_port()
    old = make(host.telemetry, clock, listeners, port)
    await old.start(host)
    await old.consume(batch(gpu(0)))
    await old.refresh()
    await old.shutdown()
    new = make(host.telemetry, clock, listeners, port)
    await new.start(host)
    try:
        clock.now += 61  # the old series would have expired by now
        await new.refresh()
        assert "hw_gpu_utilization_ratio" not in await scrape(port)
    finally:
        await new.shutdown()
        await listeners.close_all()


async def test_a_moved_endpoint_releases_the_old_port(host: FakeHost, clock: FakeClock) -> None:
    listeners, old_port, new_port = KeptListeners(), free_port(), free_port()
    old = make(host.telemetry, clock, listeners, old_port)
    await old.start(host)
    await old.shutdown()
    new = make(host.telemetry, clock, listeners, new_port)
    await new.start(host)
    try:
        await listeners.close_all()  # what the agent does once the new service runs
        assert refused(old_port)
        assert "otelgpu_build_info" in await scrape(new_port)
    finally:
        await new.shutdown()
        await listeners.close_all()


async def test_without_a_registry_shutdown_closes_the_port(
    host: FakeHost, clock: FakeClock
) -> None:
    port = free_port()
    config = PrometheusExporterConfig.model_validate({"endpoint": f"127.0.0.1:{port}"})
    exporter = PrometheusExporter(
        nvml_settings("prometheus", Kind.EXPORTER, host.telemetry), config, clock=clock.monotonic
    )
    await exporter.start(host)
    await exporter.shutdown()
    assert refused(port)


async def test_port_zero_is_never_kept(host: FakeHost, clock: FakeClock) -> None:
    listeners = KeptListeners()
    exporter = make(host.telemetry, clock, listeners, 0)
    await exporter.start(host)
    bound = exporter.port
    await exporter.shutdown()
    assert listeners.ports == [] and refused(bound)


async def test_changed_basic_auth_applies_to_the_kept_listener(
    host: FakeHost, clock: FakeClock
) -> None:
    listeners, port = KeptListeners(), free_port()
    old = make(host.telemetry, clock, listeners, port, basic_auth=basic_auth("old", "pw1"))
    await old.start(host)
    await old.shutdown()
    assert await status(port, "old", "pw1") == 200  # parked: still checks with the old settings
    new = make(host.telemetry, clock, listeners, port, basic_auth=basic_auth("new", "pw2"))
    await new.start(host)
    try:
        assert listeners.ports == []
        assert await status(port, "new", "pw2") == 200
        assert await status(port, "old", "pw1") == 401
    finally:
        await new.shutdown()
        await listeners.close_all()


async def test_a_reload_after_renewing_the_certificate_in_place_serves_the_new_one(
    host: FakeHost, clock: FakeClock, tmp_path: Path
) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    cert = self_signed_cert(tmp_path / "old")
    renewed = self_signed_cert(tmp_path / "new")
    listeners, port = KeptListeners(), free_port()
    url = f"https://localhost:{port}/metrics"
    old = make(host.telemetry, clock, listeners, port, tls=tls(cert))
    await old.start(host)
    await old.shutdown()  # parked, with the old certificate
    shutil.copyfile(renewed[0], cert[0])  # the same paths now hold the renewed pair
    shutil.copyfile(renewed[1], cert[1])
    new = make(host.telemetry, clock, listeners, port, tls=tls(cert))
    await new.start(host)
    try:
        context = ssl.create_default_context(cafile=str(renewed[0]))
        assert "otelgpu_build_info" in await _scrape_tls(url, context)
    finally:
        await new.shutdown()
        await listeners.close_all()


async def _after_a_reload(host: FakeHost, clock: FakeClock, openmetrics_asked: bool) -> bool:
    """Whether the new instance's first own body comes with OpenMetrics, when the old one had
    (or had not) been scraped in OpenMetrics."""
    listeners, port = KeptListeners(), free_port()
    old = make(host.telemetry, clock, listeners, port)
    await old.start(host)
    await old.consume(batch(gpu(0), utilization=0.25))
    await old.refresh()
    if openmetrics_asked:
        old.scraped(200, OPENMETRICS)  # Prometheus scrapes
        await old.consume(batch(gpu(0), utilization=0.5))
        await old.refresh()
        assert old.exposition.converted
    await old.shutdown()
    new = make(host.telemetry, clock, listeners, port)
    await new.start(host)
    try:
        await new.consume(batch(gpu(0), utilization=0.75))
        await new.refresh()
        exposition = new.exposition
        if exposition.converted:  # made by the render, of the new series
            assert b"0.75" in exposition.openmetrics().plain
        return exposition.converted
    finally:
        await new.shutdown()
        await listeners.close_all()


async def test_a_reload_keeps_pre_rendering_openmetrics_for_prometheus(
    host: FakeHost, clock: FakeClock
) -> None:
    """The new instance did not know Prometheus asks for OpenMetrics, so the first scrape
    after every reload converted the whole body on the scrape path (~30 ms at 10k series)."""
    assert await _after_a_reload(host, clock, openmetrics_asked=True)


async def test_a_reload_does_not_pre_render_openmetrics_no_one_asked_for(
    host: FakeHost, clock: FakeClock
) -> None:
    assert not await _after_a_reload(host, clock, openmetrics_asked=False)
