"""The health_check extension over real HTTP, the debug exporter's output, self-telemetry."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

import aiohttp
import pydantic
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.debug.config import DebugExporterConfig
from otelgpu.exporters.debug.exporter import DebugExporter
from otelgpu.extensions.health_check.config import HealthCheckExtensionConfig
from otelgpu.extensions.health_check.extension import HealthCheckExtension
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.conftest import make_settings
from tests.fakes import FakeHost


async def test_healthz_and_readyz(telemetry: SelfTelemetry) -> None:
    host = FakeHost(telemetry)
    ext = HealthCheckExtension(
        make_settings("health_check", Kind.EXTENSION, telemetry),
        HealthCheckExtensionConfig(endpoint="127.0.0.1:0"),
    )
    await ext.start(host)
    base = f"http://127.0.0.1:{ext.port}"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as r:
                assert r.status == 200
            host.ready = False
            async with http.get(f"{base}/readyz") as r:
                assert r.status == 503
                assert (await r.json()) == {"status": "not ready", "reasons": ["not started"]}
            host.ready = True
            async with http.get(f"{base}/readyz") as r:
                assert r.status == 200
    finally:
        await ext.shutdown()
        await ext.shutdown()


async def test_health_check_shutdown_without_start_is_safe(telemetry: SelfTelemetry) -> None:
    ext = HealthCheckExtension(
        make_settings("health_check", Kind.EXTENSION, telemetry), HealthCheckExtensionConfig()
    )
    await ext.shutdown()


async def test_health_check_port_in_use_fails_start(telemetry: SelfTelemetry) -> None:
    first = HealthCheckExtension(
        make_settings("health_check", Kind.EXTENSION, telemetry),
        HealthCheckExtensionConfig(endpoint="127.0.0.1:0"),
    )
    await first.start(FakeHost(telemetry))
    second = HealthCheckExtension(
        make_settings("health_check/2", Kind.EXTENSION, telemetry),
        HealthCheckExtensionConfig(endpoint=f"127.0.0.1:{first.port}"),
    )
    try:
        with pytest.raises(OSError):
            await second.start(FakeHost(telemetry))
    finally:
        await second.shutdown()
        await first.shutdown()


async def test_debug_exporter_detailed_logs_every_point(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = DebugExporter(
        make_settings("debug", Kind.EXPORTER, telemetry), DebugExporterConfig(verbosity="detailed")
    )
    point = NumberDataPoint(attributes={"code": "79"}, time_unix_nano=1, value=3)
    metric = Metric(
        name="nvidia.gpu.xid",
        unit="{error}",
        description="",
        kind=MetricKind.SUM,
        points=(point,),
        monotonic=True,
    )
    caplog.set_level(logging.INFO, logger="otelgpu")
    await exporter.consume((ResourceMetrics(resource={"hw.id": "GPU-1"}, metrics=(metric,)),))
    assert "batch: 1 resources, 1 metrics, 1 points" in caplog.text
    assert 'resource {"hw.id": "GPU-1"}' in caplog.text
    assert 'nvidia.gpu.xid{"code": "79"} = 3 {error} (sum)' in caplog.text
    sent = [
        m for m in telemetry.collect().metrics if m.name == "otelgpu_exporter_sent_points_total"
    ]
    assert sent[0].points[0].value == 1


def test_self_telemetry_reports_source_changes_once(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="otelgpu")
    for _ in range(5):
        telemetry.source_failed("containerd", "connection refused")
    telemetry.source_ok("containerd")
    telemetry.source_ok("containerd")
    assert caplog.text.count("source containerd is down") == 1
    assert caplog.text.count("source containerd is up again") == 1
    by_name = {m.name: m for m in telemetry.collect().metrics}
    assert by_name["otelgpu_source_up"].points[0].value == 1.0
    assert by_name["otelgpu_source_last_success_timestamp_seconds"].points[0].value > 0
    assert by_name["otelgpu_build_info"].points[0].attributes["version"]


async def test_health_check_caps_idle_connections_and_probes_still_answer(
    telemetry: SelfTelemetry,
) -> None:
    import asyncio

    from otelgpu.confighttp.listener import MAX_CONNECTIONS

    ext = HealthCheckExtension(
        make_settings("health_check", Kind.EXTENSION, telemetry),
        HealthCheckExtensionConfig(endpoint="127.0.0.1:0"),
    )
    await ext.start(FakeHost(telemetry))
    idle = [
        await asyncio.open_connection("127.0.0.1", ext.port) for _ in range(MAX_CONNECTIONS + 20)
    ]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{ext.port}/healthz") as response,
    ):
        assert response.status == 200
    assert ext.connections <= MAX_CONNECTIONS
    for _, writer in idle:
        writer.close()
    await ext.shutdown()


def _blocking_get(port: int, path: str) -> tuple[int, bytes]:
    """A GET made from the event loop's own thread: the loop is blocked until it returns."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


async def test_root_answers_readiness_as_the_collectors_health_check(
    telemetry: SelfTelemetry,
) -> None:
    host = FakeHost(telemetry)
    ext = HealthCheckExtension(
        make_settings("health_check", Kind.EXTENSION, telemetry),
        HealthCheckExtensionConfig(endpoint="127.0.0.1:0"),
    )
    await ext.start(host)
    try:
        assert _blocking_get(ext.port, "/")[0] == 200
        host.ready = False
        status, body = _blocking_get(ext.port, "/")
        assert status == 503 and json.loads(body)["status"] == "not ready"
    finally:
        await ext.shutdown()


async def test_path_option_moves_the_collector_style_answer(telemetry: SelfTelemetry) -> None:
    host = FakeHost(telemetry)
    config = HealthCheckExtensionConfig.model_validate(
        {"endpoint": "127.0.0.1:0", "path": "/health/status"}
    )
    ext = HealthCheckExtension(make_settings("health_check", Kind.EXTENSION, telemetry), config)
    await ext.start(host)
    try:
        assert _blocking_get(ext.port, "/health/status")[0] == 200
        assert _blocking_get(ext.port, "/")[0] == 404
        assert _blocking_get(ext.port, "/readyz")[0] == 200  # still there
        assert _blocking_get(ext.port, "/healthz")[0] == 200
    finally:
        await ext.shutdown()


@pytest.mark.parametrize("path", ["health", "/a b", "/x?y=1", ""])
def test_path_must_be_an_absolute_path(path: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="absolute path"):
        HealthCheckExtensionConfig.model_validate({"path": path})


async def test_probes_are_answered_while_the_pipeline_loop_is_blocked(
    telemetry: SelfTelemetry,
) -> None:
    # The defect: the probe server ran on the pipeline's loop, so a busy pipeline delayed
    # the kubelet's probes (a blocked loop is the extreme case: never answered).
    ext = HealthCheckExtension(
        make_settings("health_check", Kind.EXTENSION, telemetry),
        HealthCheckExtensionConfig(endpoint="127.0.0.1:0"),
    )
    await ext.start(FakeHost(telemetry))
    try:
        assert _blocking_get(ext.port, "/healthz") == (200, b'{"status": "alive"}')
        assert _blocking_get(ext.port, "/readyz")[0] == 200
    finally:
        await ext.shutdown()


async def test_healthz_says_stalled_when_the_pipeline_loop_stops_beating() -> None:
    # With probes answered from their own thread, a stuck pipeline loop must still fail the
    # liveness probe, as it did when the server ran on that loop.
    from otelgpu.extensions.health_check.server import STALL_AFTER, ProbeServer

    now = [100.0]
    server = ProbeServer("127.0.0.1", 0, lambda: (True, []), monotonic=lambda: now[0])
    await server.start()
    try:
        assert _blocking_get(server.port, "/healthz")[0] == 200
        now[0] += STALL_AFTER + 1
        status, body = _blocking_get(server.port, "/healthz")
        assert status == 503 and json.loads(body)["status"] == "stalled"
        server.beat()
        assert _blocking_get(server.port, "/healthz")[0] == 200
    finally:
        await server.stop()
