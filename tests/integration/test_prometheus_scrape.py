"""A real Prometheus 2.42 scrapes the `prometheus` exporter; we ask it what it stored."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from otelgpu.component.component import Kind
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.peers.prometheus import PrometheusServer, Result, Scrape, self_signed_cert
from tests.unit.exporters.prometheus.batches import batch, gpu, held_by

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def running(host: FakeHost, **config: Any) -> AsyncIterator[PrometheusExporter]:
    cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0", **config})
    exporter = PrometheusExporter(make_settings("prometheus", Kind.EXPORTER, host.telemetry), cfg)
    await exporter.start(host)
    try:
        yield exporter
    finally:
        await exporter.shutdown()


@contextlib.asynccontextmanager
async def prometheus(root: Path, *scrapes: Scrape) -> AsyncIterator[PrometheusServer]:
    server = PrometheusServer(root, *scrapes)
    try:
        await server.start()
        yield server
    finally:
        await server.stop()


def by(result: Result, label: str) -> dict[str, dict[str, Any]]:
    return {r["metric"][label]: r for r in result}


def value(series: dict[str, Any]) -> float:
    return float(series["value"][1])


async def test_gpu_series_arrive_with_otel_names_and_labels(host: FakeHost, tmp_path: Path) -> None:
    async with running(host, const_labels={"cluster": "eu-1"}) as exporter:
        await exporter.consume(batch(gpu(0, **held_by("train-0", "research")), gpu(1)))
        scrape = Scrape(target=f"127.0.0.1:{exporter.port}")
        async with prometheus(tmp_path, scrape) as prom:
            result = await prom.wait_for("hw_gpu_utilization_ratio", lambda r: len(r) == 2)
            gpus = by(result, "nvidia_gpu_index")
            held = gpus["0"]["metric"]
            assert held["k8s_pod_name"] == "train-0"
            assert held["k8s_namespace_name"] == "research"
            assert held["hw_id"] == gpu(0)["hw.id"]
            assert held["cluster"] == "eu-1" and held["job"] == "otelgpu"
            assert "k8s_pod_name" not in gpus["1"]["metric"]
            assert value(gpus["0"]) == 0.5
            energy = await prom.query("hw_energy_joules_total")
            assert [value(s) for s in energy] == [1234.5, 1234.5]
            memory = await prom.query('hw_gpu_memory_usage_bytes{nvidia_gpu_index="1"}')
            assert value(memory[0]) == 2 * 2**30
            # The agent's self-telemetry is on the same endpoint.
            sent = await prom.query('otelgpu_exporter_sent_points_total{exporter="prometheus"}')
            assert value(sent[0]) == 16


async def test_dcgm_naming_serves_dcgm_exporter_names_labels_and_units(
    host: FakeHost, tmp_path: Path
) -> None:
    async with running(host, naming="dcgm") as exporter:
        resource = gpu(
            2, **held_by("infer-7", "serving", "server"), **{"container.env.TEAM": "nlp"}
        )
        await exporter.consume(batch(resource, utilization=0.42))
        async with prometheus(tmp_path, Scrape(target=f"127.0.0.1:{exporter.port}")) as prom:
            result = await prom.wait_for("DCGM_FI_DEV_GPU_UTIL", lambda r: len(r) == 1)
            labels = result[0]["metric"]
            assert labels["gpu"] == "2"
            assert labels["UUID"] == resource["hw.id"]
            assert labels["device"] == "nvidia2"
            assert labels["modelName"] == "NVIDIA H100 80GB HBM3"
            assert labels["Hostname"] == "gpu-node-1"
            assert (labels["pod"], labels["namespace"], labels["container"]) == (
                "infer-7",
                "serving",
                "server",
            )
            assert labels["env_TEAM"] == "nlp"
            assert value(result[0]) == pytest.approx(42.0)
            memory = await prom.query("DCGM_FI_DEV_FB_USED")
            assert value(memory[0]) == 2048.0  # MiB
            clock = await prom.query("DCGM_FI_DEV_SM_CLOCK")
            assert value(clock[0]) == 1980.0  # MHz
            ecc = await prom.query("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
            assert value(ecc[0]) == 1.0


async def test_a_vanished_gpu_expires_and_prometheus_marks_it_stale(
    host: FakeHost, tmp_path: Path
) -> None:
    present = [gpu(0), gpu(1)]

    async def receiver() -> None:  # reports what is present, like the nvml receiver each cycle
        while True:
            await exporter.consume(batch(*present))
            await asyncio.sleep(0.2)

    async with running(host, metric_expiration="1s") as exporter:
        feeder = asyncio.create_task(receiver())
        try:
            async with prometheus(tmp_path, Scrape(target=f"127.0.0.1:{exporter.port}")) as prom:
                await prom.wait_for("hw_power_watts", lambda r: len(r) == 2)
                present.pop()  # gpu 1 is gone
                result = await prom.wait_for("hw_power_watts", lambda r: len(r) == 1)
                assert result[0]["metric"]["nvidia_gpu_index"] == "0"
                expired = await prom.query("otelgpu_prometheus_expired_series_total")
                assert value(expired[0]) >= 8  # every series of gpu 1
        finally:
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeder


async def test_scrape_over_tls_with_basic_auth(host: FakeHost, tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    password_hash = bcrypt.hashpw(b"scrape-pw", bcrypt.gensalt(rounds=10)).decode()
    config = {
        "tls": {"cert_file": str(cert), "key_file": str(key)},
        "basic_auth": {"username": "prometheus", "password_hash": password_hash},
    }
    async with running(host, **config) as exporter:
        await exporter.consume(batch(gpu(0)))
        target = f"localhost:{exporter.port}"
        tls = {"scheme": "https", "ca_file": str(cert), "username": "prometheus"}
        good = Scrape(target=target, password="scrape-pw", **tls)
        wrong = Scrape(target=target, job="wrong", password="guess", **tls)
        async with prometheus(tmp_path / "prom", good, wrong) as prom:
            result = await prom.wait_for("hw_power_watts", lambda r: len(r) == 1)
            assert result[0]["metric"]["job"] == "otelgpu"
            up = await prom.wait_for("up", lambda r: len(r) == 2)
            assert {s["metric"]["job"]: value(s) for s in up} == {"otelgpu": 1.0, "wrong": 0.0}
            targets = {t["labels"]["job"]: t for t in await prom.targets()}
            assert "401" in targets["wrong"]["lastError"]
