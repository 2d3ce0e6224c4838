"""The exporter's config: defaults and the errors operators see."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from otelgpu.exporters.prometheus.config import PrometheusExporterConfig

GOOD_HASH = "$2b$10$" + "a" * 53


def test_defaults() -> None:
    config = PrometheusExporterConfig()
    assert config.endpoint == "0.0.0.0:9400"
    assert config.metric_expiration == 300.0
    assert config.naming == "otel"
    assert config.const_labels == {} and config.tls is None and config.basic_auth is None


def test_full_config() -> None:
    config = PrometheusExporterConfig.model_validate(
        {
            "endpoint": "127.0.0.1:9500",
            "metric_expiration": "90s",
            "naming": "dcgm",
            "const_labels": {"cluster": "eu-1"},
            "tls": {"cert_file": "c.pem", "key_file": "k.pem", "min_version": "1.3"},
            "basic_auth": {"username": "prom", "password_hash": GOOD_HASH},
        }
    )
    assert config.metric_expiration == 90.0
    assert config.basic_auth is not None
    assert GOOD_HASH not in repr(config)  # a SecretStr: never printed


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"naming": "prom"}, "'otel' or 'dcgm'"),
        ({"metric_expiration": "0s"}, "greater than 0"),
        ({"metric_expiration": "5"}, "invalid duration"),
        ({"endpoint": "9400"}, "invalid endpoint"),
        ({"const_labels": {"k8s.cluster": "x"}}, 'invalid label name "k8s.cluster"'),
        ({"const_labels": {"__cluster": "x"}}, "not starting with __"),
        (
            {"tls": {"cert_file": "c.pem", "key_file": "k.pem", "min_version": "1.1"}},
            "'1.2' or '1.3'",
        ),
        ({"tls": {"cert_file": "c.pem"}}, "key_file"),
        ({"basic_auth": {"username": "p", "password_hash": "plaintext"}}, "bcrypt hash"),
        ({"basic_auth": {"username": "", "password_hash": GOOD_HASH}}, "at least 1 character"),
        ({"listen": "0.0.0.0:1"}, "Extra inputs are not permitted"),
    ],
)
def test_errors(value: dict, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        PrometheusExporterConfig.model_validate(value)
    assert message in str(info.value)


PIPELINE = """\
receivers:
  sample: {}
exporters:
  prometheus:
    endpoint: ${env:PROM_ENDPOINT:-0.0.0.0:9400}
    naming: dcgm
    metric_expiration: 2m
    basic_auth:
      username: prometheus
      password_hash: "HASH"
service:
  pipelines:
    metrics:
      receivers: [sample]
      exporters: [prometheus]
"""


def test_loads_from_a_pipeline_file_and_print_config_hides_the_hash() -> None:
    from otelgpu.component.component import ComponentID, Kind
    from otelgpu.component.registry import Registry
    from otelgpu.config.loader import load
    from otelgpu.config.render import render
    from otelgpu.config.schema import validate
    from otelgpu.exporters.prometheus import factory
    from tests.components import core_registry

    text = PIPELINE.replace("HASH", GOOD_HASH)
    raw = load([("p.yaml", text)], environ={"PROM_ENDPOINT": "127.0.0.1:9500"})
    config = validate(raw, Registry([*core_registry(), factory]))
    exporter = config.components[Kind.EXPORTER][ComponentID("prometheus")]
    assert isinstance(exporter, PrometheusExporterConfig)
    assert exporter.endpoint == "127.0.0.1:9500" and exporter.naming == "dcgm"
    assert exporter.metric_expiration == 120.0
    printed = render(config)
    assert GOOD_HASH not in printed and "[REDACTED]" in printed
    assert "metric_expiration: 2m" in printed


def test_collector_options_namespace_timestamps_and_resource_conversion() -> None:
    config = PrometheusExporterConfig.model_validate(
        {
            "endpoint": ":9400",
            "namespace": "test-space",
            "send_timestamps": False,
            "resource_to_telemetry_conversion": {"enabled": True},
        }
    )
    assert config.namespace == "test_space"  # made a valid name prefix, as the Collector does
    assert config.endpoint == ":9400"
    assert PrometheusExporterConfig(namespace="9gpu").namespace == "_9gpu"
    with pytest.raises(ValidationError, match="scrape time"):
        PrometheusExporterConfig.model_validate({"send_timestamps": True})


async def test_namespace_prefixes_pipeline_series_but_not_the_agents_own() -> None:
    import aiohttp

    from otelgpu.component.component import Kind
    from otelgpu.component.telemetry import SelfTelemetry
    from otelgpu.exporters.prometheus.exporter import PrometheusExporter
    from tests.fakes import FakeClock, FakeHost
    from tests.peers.ports import free_port_everywhere
    from tests.unit.exporters.prometheus.batches import batch, gpu
    from tests.unit.exporters.prometheus.translators import nvml_settings

    clock, telemetry = FakeClock(), SelfTelemetry()
    host = FakeHost(telemetry)
    # ":PORT": no host means every interface; it must answer on the loopback address. (Not
    # ":0": each interface's socket would get its own free port.)
    port = free_port_everywhere()
    cfg = PrometheusExporterConfig.model_validate({"endpoint": f":{port}", "namespace": "gpu"})
    settings = nvml_settings("prometheus", Kind.EXPORTER, telemetry)
    exporter = PrometheusExporter(settings, cfg, clock=clock.monotonic, sleep=clock.sleep)
    await exporter.start(host)
    try:
        await exporter.consume(batch(gpu(0)))
        await exporter.refresh()
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            body = await response.text()
    finally:
        await exporter.shutdown()
    assert "\ngpu_hw_gpu_utilization_ratio{" in body
    assert "\nhw_gpu_utilization_ratio{" not in body
    assert "\notelgpu_build_info{" in body and "gpu_otelgpu_" not in body
