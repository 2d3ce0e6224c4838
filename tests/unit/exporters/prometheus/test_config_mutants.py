"""The prometheus exporter's config as `otelgpu validate` and print-config show it: the
documented defaults, the TLS section's rules, and the Collector options it answers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.render import render
from otelgpu.config.schema import validate
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.service.builtins import builtin_registry


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


def test_collector_options_written_as_their_default_are_printed_as_written() -> None:
    printed = _printed_exporter(
        "{send_timestamps: false, resource_to_telemetry_conversion: {enabled: true}}"
    )
    assert "    resource_to_telemetry_conversion:\n      enabled: true\n" in printed
    assert printed.endswith("    send_timestamps: false")


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
