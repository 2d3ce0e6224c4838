"""The exporter's promises no other test held: the start line names the URL it serves, with
its scheme and whether a reload kept the listener; a reload with a renewed certificate at the
same path serves the new one; replaced series are counted in the self-telemetry."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import ssl
from pathlib import Path

import aiohttp
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue, ResourceMetrics
from tests.fakes import FakeClock, FakeHost
from tests.peers.ports import free_port
from tests.peers.prometheus import self_signed_cert
from tests.unit.exporters.prometheus.batches import gauge, gpu, held_by
from tests.unit.exporters.prometheus.translators import nvml_settings

LOGGER = "otelgpu.exporter.prometheus"


def make(
    host: FakeHost,
    clock: FakeClock,
    endpoint: str = "127.0.0.1:0",
    listeners: KeptListeners | None = None,
    **extra: object,
) -> PrometheusExporter:
    config = PrometheusExporterConfig.model_validate({"endpoint": endpoint, **extra})
    settings = nvml_settings("prometheus", Kind.EXPORTER, host.telemetry)
    settings = dataclasses.replace(settings, listeners=listeners)
    return PrometheusExporter(settings, config, clock=clock.monotonic, sleep=clock.sleep)


def device(**labels: AttrValue) -> ResourceMetrics:
    """GPU 0 as the nvml receiver names it (identity = UUID), with processor labels."""
    resource = gpu(0, **labels)
    return ResourceMetrics(
        resource=resource,
        metrics=(gauge("hw.power", "W", 300.0),),
        identity=resource[semconv.HW_ID],
    )


def served(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER and r.getMessage().startswith("serving ")
    ]


def tls(cert: tuple[Path, Path]) -> dict[str, str]:
    return {"cert_file": str(cert[0]), "key_file": str(cert[1])}


async def scrape(url: str, context: ssl.SSLContext | None = None) -> str:
    async with aiohttp.ClientSession() as session, session.get(url, ssl=context) as response:
        assert response.status == 200
        return await response.text()


async def test_the_start_line_names_the_plain_http_url_and_naming(
    host: FakeHost, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = make(host, clock, naming="dcgm")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await exporter.start(host)
    await exporter.shutdown()
    assert served(caplog) == ["serving http://127.0.0.1:0/metrics (dcgm naming)"]


async def test_the_start_line_names_https_when_tls_is_set(
    host: FakeHost, clock: FakeClock, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    exporter = make(host, clock, tls=tls(self_signed_cert(tmp_path)))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await exporter.start(host)
    await exporter.shutdown()
    assert served(caplog) == ["serving https://127.0.0.1:0/metrics (otel naming)"]


async def test_the_start_line_says_when_a_reload_kept_the_listener(
    host: FakeHost, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    listeners, port = KeptListeners(), free_port()
    old = make(host, clock, f"127.0.0.1:{port}", listeners)
    new = make(host, clock, f"127.0.0.1:{port}", listeners)
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


async def test_a_reload_after_renewing_the_certificate_in_place_serves_the_new_one(
    host: FakeHost, clock: FakeClock, tmp_path: Path
) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    cert = self_signed_cert(tmp_path / "old")
    renewed = self_signed_cert(tmp_path / "new")
    listeners, port = KeptListeners(), free_port()
    url = f"https://localhost:{port}/metrics"
    old = make(host, clock, f"127.0.0.1:{port}", listeners, tls=tls(cert))
    await old.start(host)
    await old.shutdown()  # parked, with the old certificate
    shutil.copyfile(renewed[0], cert[0])  # the same paths now hold the renewed pair
    shutil.copyfile(renewed[1], cert[1])
    new = make(host, clock, f"127.0.0.1:{port}", listeners, tls=tls(cert))
    await new.start(host)
    try:
        context = ssl.create_default_context(cafile=str(renewed[0]))
        assert "otelgpu_build_info" in await scrape(url, context)
    finally:
        await new.shutdown()
        await listeners.close_all()


async def test_series_replaced_by_a_relabelled_device_are_counted(
    host: FakeHost, clock: FakeClock
) -> None:
    exporter = make(host, clock)
    await exporter.start(host)
    try:
        await exporter.consume((device(),))
        await exporter.consume((device(**held_by("train-0")),))  # its pod's labels arrive
        await exporter.refresh()
        body = await scrape(f"http://127.0.0.1:{exporter.port}/metrics")
    finally:
        await exporter.shutdown()
    # its unlabelled power line gave way to the labelled one
    assert [x for x in body.splitlines() if x.startswith("otelgpu_prometheus_relabelled_")] == [
        'otelgpu_prometheus_relabelled_series_total{exporter="prometheus"} 1'
    ]
