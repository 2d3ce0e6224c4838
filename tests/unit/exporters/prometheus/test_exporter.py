"""The exporter end to end over HTTP: the start line, bodies, self-telemetry, expiry, bad data,
lifecycle."""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus import factory
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.fakes import FakeClock, FakeHost
from tests.peers.prometheus import self_signed_cert
from tests.unit.exporters.prometheus.batches import batch, counter, gauge, gpu, held_by
from tests.unit.exporters.prometheus.translators import nvml_settings


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Waits for background work that runs in a real thread (gzip) to land."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.01)


def make(telemetry: SelfTelemetry, clock: FakeClock, **config: object) -> PrometheusExporter:
    cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0", **config})
    settings = nvml_settings("prometheus", Kind.EXPORTER, telemetry)
    return PrometheusExporter(settings, cfg, clock=clock.monotonic, sleep=clock.sleep)


@pytest.fixture
async def exporter(host: FakeHost, clock: FakeClock) -> AsyncIterator[PrometheusExporter]:
    exp = make(host.telemetry, clock, metric_expiration="1m")
    await exp.start(host)
    yield exp
    await exp.shutdown()


async def scrape(exp: PrometheusExporter, encoding: str = "identity") -> tuple[dict, bytes]:
    """(headers, raw body) of one GET /metrics."""
    url = f"http://127.0.0.1:{exp.port}/metrics"
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.get(url, headers={"Accept-Encoding": encoding}) as r,
    ):
        return dict(r.headers), await r.read()


async def text(exp: PrometheusExporter) -> str:
    return (await scrape(exp))[1].decode()


LOGGER = "otelgpu.exporter.prometheus"


def served(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER and r.getMessage().startswith("serving ")
    ]


def tls(cert: tuple[Path, Path]) -> dict[str, str]:
    return {"cert_file": str(cert[0]), "key_file": str(cert[1])}


def device(**labels: AttrValue) -> ResourceMetrics:
    """GPU 0 as the nvml receiver names it (identity = UUID), with processor labels."""
    resource = gpu(0, **labels)
    return ResourceMetrics(
        resource=resource,
        metrics=(gauge("hw.power", "W", 300.0),),
        identity=resource[semconv.HW_ID],
    )


async def test_serves_consumed_points_and_self_telemetry(exporter: PrometheusExporter) -> None:
    await exporter.consume(batch(gpu(0, **held_by("train-0")), gpu(1)))
    await exporter.refresh()
    body = await text(exporter)
    assert "hw_gpu_utilization_ratio{" in body and 'k8s_pod_name="train-0"' in body
    assert body.count("hw_gpu_utilization_ratio{") == 2
    assert "# TYPE hw_energy_joules_total counter" in body
    assert 'otelgpu_build_info{version="' in body
    assert 'otelgpu_exporter_sent_points_total{exporter="prometheus"} 16' in body


async def test_the_start_line_names_the_plain_http_url_and_naming(
    host: FakeHost, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = make(host.telemetry, clock, naming="dcgm")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await exporter.start(host)
    await exporter.shutdown()
    assert served(caplog) == ["serving http://127.0.0.1:0/metrics (dcgm naming)"]


async def test_the_start_line_names_https_when_tls_is_set(
    host: FakeHost, clock: FakeClock, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    exporter = make(host.telemetry, clock, tls=tls(self_signed_cert(tmp_path)))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await exporter.start(host)
    await exporter.shutdown()
    assert served(caplog) == ["serving https://127.0.0.1:0/metrics (otel naming)"]


async def test_gzip_body_is_the_plain_body_compressed(exporter: PrometheusExporter) -> None:
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    plain_headers, plain = await scrape(exporter, "identity")
    zipped_headers, zipped = await scrape(exporter, "deflate, gzip;q=0.8")
    refused_headers, _ = await scrape(exporter, "gzip;q=0")
    assert zipped_headers["Content-Encoding"] == "gzip"
    assert "Content-Encoding" not in plain_headers and "Content-Encoding" not in refused_headers
    assert gzip.decompress(zipped) == plain and b"hw_power_watts" in plain
    assert plain_headers["Content-Type"].startswith("text/plain; version=0.0.4")


async def test_a_batch_rerenders_the_body_in_the_background(exporter: PrometheusExporter) -> None:
    await exporter.consume(batch(gpu(0), utilization=0.25))
    await until(lambda: b"hw_gpu_utilization_ratio" in exporter.body.plain)
    await exporter.consume(batch(gpu(0), utilization=0.75))
    await until(lambda: b"} 0.75\n" in exporter.body.plain)


async def test_a_failing_render_is_logged_once_per_streak_and_rendering_goes_on(
    exporter: PrometheusExporter, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in rendering must not end the render loop, nor flood the log every batch."""
    real = exporter.refresh
    tries: list[int] = []

    async def broken() -> None:
        tries.append(1)
        raise RuntimeError("a bug")

    monkeypatch.setattr(exporter, "refresh", broken)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            await exporter.consume(batch(gpu(0), utilization=0.25))
            count = len(tries)
            await until(lambda count=count: len(tries) > count)
    monkeypatch.setattr(exporter, "refresh", real)
    await exporter.consume(batch(gpu(0), utilization=0.75))
    await until(lambda: b"} 0.75\n" in exporter.body.plain)  # the loop went on
    failed = [r for r in caplog.records if r.getMessage() == "rendering /metrics failed"]
    assert len(failed) == 1


async def test_series_expire_without_batches_or_scrapes(
    exporter: PrometheusExporter, clock: FakeClock
) -> None:
    await exporter.consume(batch(gpu(0), gpu(1)))
    await clock.advance(40)
    await exporter.consume(batch(gpu(0)))  # gpu 1 vanished from the node
    await until(lambda: exporter.body.plain.count(b"hw_power_watts{") == 2)
    await clock.advance(25)  # gpu 1 last updated 65 s ago: past the 1m expiration
    await until(lambda: exporter.body.plain.count(b"hw_power_watts{") == 1)
    assert b'hw_name="nvidia0"' in exporter.body.plain
    assert b'hw_name="nvidia1"' not in exporter.body.plain
    await clock.advance(40)  # now gpu 0 is gone as well; no batch, no scrape needed
    await until(lambda: b"hw_power_watts" not in exporter.body.plain)
    assert (  # 8 series and an info series per GPU
        b'otelgpu_prometheus_expired_series_total{exporter="prometheus"} 18' in exporter.body.plain
    )


async def test_self_telemetry_stays_current_without_batches(
    exporter: PrometheusExporter, host: FakeHost, clock: FakeClock
) -> None:
    host.telemetry.source_failed("containerd", "connection refused")
    await clock.advance(exporter.refresh_interval)
    await until(lambda: b'otelgpu_source_up{source="containerd"} 0' in exporter.body.plain)


async def test_scrapes_are_counted(exporter: PrometheusExporter) -> None:
    await scrape(exporter)
    await scrape(exporter)
    await exporter.refresh()
    assert (
        b'otelgpu_prometheus_scrapes_total{code="200",exporter="prometheus",format="text"} 2'
        in exporter.body.plain
    )


async def test_series_replaced_by_a_relabelled_device_are_counted(
    exporter: PrometheusExporter,
) -> None:
    await exporter.consume((device(),))
    await exporter.consume((device(**held_by("train-0")),))  # its pod's labels arrive
    await exporter.refresh()
    body = await text(exporter)
    # its unlabelled power line gave way to the labelled one
    assert [x for x in body.splitlines() if x.startswith("otelgpu_prometheus_relabelled_")] == [
        'otelgpu_prometheus_relabelled_series_total{exporter="prometheus"} 1'
    ]


async def test_bad_points_are_counted_and_dropped(
    exporter: PrometheusExporter, telemetry: SelfTelemetry
) -> None:
    broken = Metric(
        name="hw.power",
        unit="W",
        description="",
        kind=MetricKind.GAUGE,
        points=(NumberDataPoint(attributes={}, time_unix_nano=1, value="lots"),),  # type: ignore[arg-type]
    )
    # Another metric whose Prometheus name is taken by a family of another type: the first
    # family keeps the name.
    clash = gauge("hw.energy.joules.total", "", 5)
    good = ResourceMetrics(
        resource=gpu(0), metrics=(gauge("hw.power", "W", 100), counter("hw.energy", "J", ({}, 1)))
    )
    bad = ResourceMetrics(resource=gpu(1), metrics=(broken,))
    await exporter.consume((good, bad, ResourceMetrics(resource=gpu(2), metrics=(clash,))))
    await exporter.refresh()
    body = exporter.body.plain.decode()
    assert body.count("hw_power_watts{") == 1
    assert 'otelgpu_exporter_failed_points_total{exporter="prometheus"} 2' in body
    assert "# TYPE hw_energy_joules_total counter" in body and "} 5\n" not in body


async def test_const_labels_on_every_series(host: FakeHost, clock: FakeClock) -> None:
    exp = make(host.telemetry, clock, const_labels={"cluster": "eu-1"})
    await exp.start(host)
    try:
        await exp.consume(batch(gpu(0)))
        await exp.refresh()
        lines = [line for line in (await text(exp)).splitlines() if not line.startswith("#")]
        assert lines and all('cluster="eu-1"' in line for line in lines)
    finally:
        await exp.shutdown()


async def test_shutdown_is_idempotent_and_safe_without_start(telemetry: SelfTelemetry) -> None:
    exp = factory.create(
        nvml_settings("prometheus", Kind.EXPORTER, telemetry), PrometheusExporterConfig()
    )
    await exp.shutdown()
    await exp.shutdown()


async def test_shutdown_frees_the_port(host: FakeHost, clock: FakeClock) -> None:
    exp = make(host.telemetry, clock)
    await exp.start(host)
    port = exp.port
    await exp.shutdown()
    again = make(host.telemetry, clock, endpoint=f"127.0.0.1:{port}")
    await again.start(host)
    await again.shutdown()


async def test_the_labels_cached_for_holders_gone_two_expiration_periods_are_forgotten(
    host: FakeHost, clock: FakeClock
) -> None:
    """dcgm-exporter's per-holder copies of a shared GPU are written the general way, their
    labels cached per holder: with holders changing every period, the exporter's refresh
    lets the cache go of holders unused for a whole period, so it never holds more than one
    period's holders, however many were seen."""
    exporter = make(
        host.telemetry, clock, naming="dcgm", shared_gpu_series="per_holder", metric_expiration="1m"
    )
    await exporter.start(host)
    labels = exporter._translator.labels
    shared = {semconv.GPU_SHARED: True, semconv.GPU_HOLDERS: 2}
    try:
        for n in range(6):
            pods = (f"job-{n}-a", f"job-{n}-b")
            allocations = [
                ResourceMetrics(
                    resource=(resource := gpu(0, **held_by(pod), **shared)),
                    metrics=(gauge(semconv.GPU_ALLOCATION, "1", 0.5),),
                    identity=(semconv.GPU_ALLOCATION, resource[semconv.HW_ID]),
                )
                for pod in pods
            ]
            await exporter.consume((device(**shared), *allocations))
            await exporter.refresh()
            assert f'pod="{pods[0]}"'.encode() in exporter.body.plain
            await clock.advance(61)  # past the expiration: the next refresh starts a generation
            await exporter.refresh()
            if n == 0:
                one_period = len(labels)  # what one period's holders leave cached
            assert len(labels) == one_period, n
    finally:
        await exporter.shutdown()
