"""A pull reader (`service::telemetry::metrics::readers`) serves the agent's own metrics on its own
address, and the prometheus exporter's `/metrics` then leaves them out; the reader's port stays
open through a reload that keeps it; a port it cannot bind fails the start by the reader's key."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from otelgpu.component.component import ComponentID
from otelgpu.component.errors import StartError
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import AgentConfig, validate
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.service.builtins import builtin_registry
from otelgpu.service.service import Service
from tests.peers.ports import free_port

PIPELINE = """\
receivers:
  nvml: {{backend: simulated, collection_interval: 1h}}
exporters:
  prometheus: {{endpoint: "127.0.0.1:{exporter}", metric_expiration: 3h}}
service:
  pipelines:
    metrics: {{receivers: [nvml], exporters: [prometheus]}}
"""
READER = """\
service:
  telemetry:
    metrics:
      readers: [{{pull: {{exporter: {{prometheus: {{host: 127.0.0.1, port: {reader}}}}}}}}}]
"""


def _config(exporter: int, reader: int | None = None) -> AgentConfig:
    files = [("p.yaml", PIPELINE.format(exporter=exporter))]
    if reader is not None:
        files.append(("r.yaml", READER.format(reader=reader)))
    return validate(load(files, environ={}), builtin_registry())


async def _get(port: int, path: str = "/metrics", method: str = "GET") -> tuple[int, str, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, response.headers.get("Content-Type", ""), await response.text()


async def _exporter_body(service: Service) -> str:
    assert service.graph is not None
    exporter = service.graph.exporters[ComponentID.parse("prometheus")]
    assert isinstance(exporter, PrometheusExporter)
    point = NumberDataPoint(attributes={}, time_unix_nano=1, value=0.5)
    gpu = Metric(
        name="hw.gpu.utilization", unit="1", description="", kind=MetricKind.GAUGE, points=(point,)
    )
    await exporter.consume((ResourceMetrics(resource={"hw.id": "GPU-0"}, metrics=(gpu,)),))
    await exporter.refresh()  # what the next scrape gets, rendered now
    return (await _get(exporter.port))[2]


def _own(body: str) -> list[str]:
    return [line for line in body.splitlines() if "otelgpu_" in line]


async def test_a_reader_serves_the_agents_metrics_and_the_exporter_leaves_them_out(
    telemetry: SelfTelemetry,
) -> None:
    reader = free_port()
    service = Service(_config(free_port(), reader), builtin_registry(), telemetry)
    await service.start()
    try:
        telemetry.receiver_points("nvml", 3)
        status, content_type, body = await _get(reader)
        assert (status, content_type) == (200, "text/plain; version=0.0.4; charset=utf-8")
        assert "# TYPE otelgpu_build_info gauge\notelgpu_build_info{version=" in body
        assert 'otelgpu_receiver_points_total{receiver="nvml"} 3' in body
        assert "hw_" not in body  # the pipelines' series stay on the exporter
        exporter = await _exporter_body(service)
        assert "hw_gpu_utilization" in exporter and _own(exporter) == []
        assert (await _get(reader, "/"))[0] == 404
        assert (await _get(reader, method="POST"))[0] == 405
        assert (await _get(reader, method="HEAD"))[0] == 200
        assert service.readers.ports == [reader]
    finally:
        await service.shutdown()
    # Without a reader the exporter serves them again (the next service, after a reload).
    plain = Service(_config(free_port()), builtin_registry(), telemetry)
    await plain.start()
    try:
        assert "otelgpu_build_info{version=" in "\n".join(_own(await _exporter_body(plain)))
        assert telemetry.collect().metrics
    finally:
        await plain.shutdown()


async def test_a_reload_that_keeps_the_reader_keeps_its_port_open(
    telemetry: SelfTelemetry,
) -> None:
    listeners, reader = KeptListeners(), free_port()
    old = Service(_config(free_port(), reader), builtin_registry(), telemetry, listeners)
    await old.start()
    await old.shutdown()
    assert reader in listeners.ports
    assert (await _get(reader))[0] == 200  # parked, still answering between the two services
    new = Service(_config(free_port(), reader), builtin_registry(), telemetry, listeners)
    await new.start()
    try:
        assert reader not in listeners.ports  # taken back, not bound again
        telemetry.config_loaded(False)
        assert "otelgpu_config_reload_failures_total 1" in (await _get(reader))[2]
    finally:
        await new.shutdown()
    moved = Service(_config(free_port()), builtin_registry(), telemetry, listeners)
    await moved.start()  # the reader is gone: the agent closes what nobody took back
    try:
        await listeners.close_all()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", reader), timeout=5).close()
    finally:
        await moved.shutdown()
        await listeners.close_all()


async def test_a_reader_that_cannot_listen_fails_the_start_by_its_key(
    telemetry: SelfTelemetry,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        exporter = free_port()
        service = Service(_config(exporter, taken.getsockname()[1]), builtin_registry(), telemetry)
        with pytest.raises(StartError) as info:
            await service.start()
    assert str(info.value).startswith(
        'failed to start "service::telemetry::metrics::readers::0" telemetry reader:'
    )
    assert service.readers.ports == []
    with socket.socket() as again:  # nothing of the service was left listening
        again.bind(("127.0.0.1", exporter))


def test_the_push_and_the_reader_read_what_the_exporters_no_longer_do() -> None:
    telemetry = SelfTelemetry()
    telemetry.pulled_apart(True)
    assert telemetry.collect().metrics == ()
    assert [m.name for m in telemetry.collect(reader=True).metrics] == ["otelgpu_build_info"]
    telemetry.pulled_apart(False)
    assert [m.name for m in telemetry.collect().metrics] == ["otelgpu_build_info"]
