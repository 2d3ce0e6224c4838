"""The exporter's config: defaults as print-config shows them, the TLS section's rules, the
Collector options it answers, and the errors operators see."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.render import render
from otelgpu.config.schema import validate
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.service.builtins import builtin_registry

GOOD_HASH = "$2b$10$" + "a" * 53


def test_defaults() -> None:
    config = PrometheusExporterConfig()
    assert config.endpoint == "0.0.0.0:9400"
    assert config.metric_expiration == 300.0
    assert config.naming == "otel"
    assert config.const_labels == {} and config.tls is None and config.basic_auth is None


def _file(options: str) -> str:
    return (
        "receivers: {nvml: {backend: simulated}}\n"
        f"exporters:\n  prometheus: {options}\n"
        "service: {pipelines: {metrics: {receivers: [nvml], exporters: [prometheus]}}}\n"
    )


def _printed_exporter(options: str) -> str:
    printed = render(validate(load([("p.yaml", _file(options))], environ={}), builtin_registry()))
    return printed[printed.index("\nexporters:\n") : printed.index("\nservice:\n")]


def test_print_config_shows_the_documented_defaults() -> None:
    assert _printed_exporter("{}") == (
        "\nexporters:\n"
        "  prometheus:\n"
        "    endpoint: 0.0.0.0:9400\n"
        "    metric_expiration: 5m\n"
        "    naming: otel\n"
        "    const_labels: {}\n"
        "    shared_gpu_series: device\n"
        "    dcgm_labels:\n"
        "      hostname: Hostname\n"
        "      pod_uid: false\n"
        "      dra: false\n"
        "    device_info: true\n"
        "    tls: null\n"
        "    basic_auth: null\n"
        "    namespace: ''\n"
        "    resource_to_telemetry_conversion:\n"
        "      enabled: false\n"
        "    send_timestamps: false"
    )


def test_tls_defaults_to_no_client_certificates_and_tls_1_2() -> None:
    printed = _printed_exporter("{tls: {cert_file: c.pem, key_file: k.pem}}")
    assert (
        "    tls:\n"
        "      cert_file: c.pem\n"
        "      key_file: k.pem\n"
        "      client_ca_file: ''\n"
        "      min_version: '1.2'\n"
    ) in printed


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
    assert config.const_labels == {"cluster": "eu-1"}
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
            {"const_labels": {"k8s.cluster": "x", "ok": "y", "1a": "z"}},
            'invalid label names "k8s.cluster", "1a": expected',
        ),
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


@pytest.mark.parametrize(
    ("tls", "error"),
    [
        (
            "{cert_file: c.pem, key_file: ''}",
            "p.yaml:3:50: exporters::prometheus::tls::key_file: string should have at least 1 "
            "character",
        ),
        (
            "{cert_file: '', key_file: k.pem}",
            "p.yaml:3:33: exporters::prometheus::tls::cert_file: string should have at least 1 "
            "character",
        ),
    ],
)
def test_an_empty_certificate_or_key_path_is_refused_where_it_is_written(
    tls: str, error: str
) -> None:
    with pytest.raises(ConfigError) as info:
        validate(load([("p.yaml", _file(f"{{tls: {tls}}}"))], environ={}), builtin_registry())
    assert str(info.value) == error


def test_resource_constant_labels_gets_an_answer_instead_of_a_bare_unknown_key() -> None:
    with pytest.raises(ValidationError) as info:
        PrometheusExporterConfig.model_validate({"resource_constant_labels": ["k8s.pod.name"]})
    assert (
        "resource_constant_labels (a Collector option) is not needed here: every resource "
        "attribute (GPU, pod, node, business labels) is already a label on each series"
    ) in str(info.value)
    assert "use const_labels for fixed labels" in str(info.value)


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


def test_collector_options_written_as_their_default_are_printed_as_written() -> None:
    printed = _printed_exporter(
        "{send_timestamps: false, resource_to_telemetry_conversion: {enabled: true}}"
    )
    assert "    resource_to_telemetry_conversion:\n      enabled: true\n" in printed
    assert printed.endswith("    send_timestamps: false")


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
