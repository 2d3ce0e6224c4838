"""Config of the otlp and otlp_http exporters: defaults, validation, secrets."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from otelgpu.exporters.otlp.config import OtlpExporterConfig, OtlpHttpExporterConfig


def test_defaults_are_the_collectors() -> None:
    grpc = OtlpExporterConfig()
    http = OtlpHttpExporterConfig()
    assert grpc.endpoint == "localhost:4317" and grpc.target() == ("localhost:4317", False)
    assert http.url() == "http://localhost:4318/v1/metrics"
    for config in (grpc, http):
        assert (config.compression, config.timeout) == ("gzip", 5.0)
        retry = config.retry_on_failure
        assert (retry.enabled, retry.initial_interval, retry.max_interval) == (True, 5.0, 30.0)
        assert retry.max_elapsed_time == 300.0
        queue = config.sending_queue
        assert (queue.enabled, queue.num_consumers) == (True, 1)
        assert (queue.sizer, queue.queue_size) == ("bytes", 6 << 20)  # its memory, bounded
        assert queue.drain_timeout == 20.0


def test_durations_and_nested_sections_parse() -> None:
    config = OtlpExporterConfig.model_validate(
        {
            "endpoint": "gateway:4317",
            "tls": {"insecure": True},
            "timeout": "500ms",
            "retry_on_failure": {
                "initial_interval": "1s",
                "max_interval": "1m",
                "max_elapsed_time": "0s",
            },
            "sending_queue": {"queue_size": 10, "num_consumers": 2},
        }
    )
    assert config.target() == ("gateway:4317", True)
    assert config.timeout == 0.5
    assert config.retry_on_failure.max_interval == 60.0
    assert config.retry_on_failure.max_elapsed_time == 0.0
    assert config.sending_queue.queue_size == 10


@pytest.mark.parametrize(
    ("endpoint", "target"),
    [
        ("http://gw:4317", ("gw:4317", True)),
        ("https://gw:4317", ("gw:4317", False)),
        ("[::1]:4317", ("[::1]:4317", False)),
    ],
)
def test_grpc_scheme_decides_plaintext(endpoint: str, target: tuple[str, bool]) -> None:
    assert OtlpExporterConfig(endpoint=endpoint, tls={"insecure": False}).target() == target  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cls", "data", "message"),
    [
        (OtlpExporterConfig, {"endpoint": "gw"}, "expected host:port"),
        (OtlpExporterConfig, {"endpoint": "tcp://gw:1"}, "scheme must be http:// or https://"),
        (OtlpExporterConfig, {"tls": {"cert_file": "c.pem"}}, "must be set together"),
        (OtlpExporterConfig, {"tls": {"cert_pem": "x"}}, "must be set together"),
        (
            OtlpExporterConfig,
            {"tls": {"min_version": "1.1", "max_version": "1.1"}},
            "HTTP/2, which needs TLS 1.2",
        ),
        (
            OtlpExporterConfig,
            {"tls": {"min_version": "1.0", "max_version": "1.0"}},
            "HTTP/2, which needs TLS 1.2",
        ),
        (OtlpHttpExporterConfig, {"tls": {"min_version": "1.3", "max_version": "1.2"}}, "lower"),
        (OtlpExporterConfig, {"tls": {"ca_file": "a", "ca_pem": "b"}}, "ca_file or ca_pem, not"),
        (OtlpExporterConfig, {"tls": {"min_version": "1.4"}}, "'1.0', '1.1', '1.2' or '1.3'"),
        (OtlpExporterConfig, {"retry_on_failure": {"multiplier": 0}}, "greater than 0"),
        (
            OtlpExporterConfig,
            {"retry_on_failure": {"randomization_factor": 1.5}},
            "less than or equal to 1",
        ),
        (
            OtlpHttpExporterConfig,
            {"endpoint": "localhost:4318"},
            "expected an http:// or https:// URL",
        ),
        (OtlpHttpExporterConfig, {"tls": {"key_file": "k.pem"}}, "must be set together"),
        (OtlpHttpExporterConfig, {"tls": {"key_pem": "k", "key_file": "k"}}, "not both"),
        (OtlpHttpExporterConfig, {"compression": "zstd"}, "'gzip' or 'none'"),
        (OtlpHttpExporterConfig, {"timeout": "0s"}, "greater than 0"),
        (OtlpHttpExporterConfig, {"timeout": 5}, "invalid duration"),
        (
            OtlpHttpExporterConfig,
            {"sending_queue": {"queue_size": 0}},
            "greater than or equal to 1",
        ),
        (
            OtlpHttpExporterConfig,
            {"retry_on_failure": {"initial_interval": "10s", "max_interval": "1s"}},
            "max_interval must not be shorter",
        ),
        (OtlpHttpExporterConfig, {"retries": {}}, "Extra inputs"),
    ],
)
def test_invalid_options_are_refused(cls: type, data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        cls.model_validate(data)


def test_http_paths() -> None:
    assert OtlpHttpExporterConfig(endpoint="https://gw:4318/").url() == "https://gw:4318/v1/metrics"
    explicit = OtlpHttpExporterConfig(metrics_endpoint="http://gw/otlp/metrics")
    assert explicit.url() == "http://gw/otlp/metrics"


def test_header_values_are_secret_everywhere_but_the_transport() -> None:
    config = OtlpHttpExporterConfig.model_validate({"headers": {"Authorization": "Bearer s3cret"}})
    assert config.model_dump(mode="json")["headers"] == {"Authorization": "[REDACTED]"}
    assert config.model_dump()["headers"] == {"Authorization": "[REDACTED]"}
    assert "s3cret" not in repr(config) and "s3cret" not in str(config)
    assert config.header_items() == [("Authorization", "Bearer s3cret")]


def test_collector_retry_and_tls_options_are_accepted() -> None:
    config = OtlpHttpExporterConfig.model_validate(
        {
            "endpoint": "https://gw:4318",
            "retry_on_failure": {"multiplier": 2, "randomization_factor": 0},
            "tls": {
                "ca_pem": "-----BEGIN CERTIFICATE-----",
                "cert_pem": "c",
                "key_pem": "KEY-SECRET-TEXT",
                "min_version": "1.3",
                "server_name_override": "gw.internal",
                "insecure_skip_verify": False,
            },
        }
    )
    assert config.retry_on_failure.multiplier == 2
    assert config.retry_on_failure.randomization_factor == 0
    assert config.tls.key_pem_text() == "KEY-SECRET-TEXT"
    assert "KEY-SECRET-TEXT" not in repr(config.tls)
    grpc = OtlpExporterConfig.model_validate({"tls": {"min_version": "1.1"}})
    assert grpc.tls.min_version == "1.1"


def test_backoff_follows_the_configured_multiplier_and_randomization() -> None:
    from otelgpu.component.errors import ExportError
    from otelgpu.exporterhelper.config import RetryConfig
    from otelgpu.exporterhelper.retry import Backoff

    error = ExportError("down", retryable=True)
    steady = RetryConfig.model_validate(
        {
            "initial_interval": "1s",
            "max_interval": "10s",
            "multiplier": 3,
            "randomization_factor": 0,
        }
    )
    backoff = Backoff(steady, 0.0, rand=lambda: 0.0)
    assert [backoff.next_delay(error, 0.0) for _ in range(4)] == [1.0, 3.0, 9.0, 10.0]
    wide = RetryConfig.model_validate({"initial_interval": "1s", "randomization_factor": 0.2})
    low, high = Backoff(wide, 0.0, rand=lambda: 0.0), Backoff(wide, 0.0, rand=lambda: 1.0)
    assert low.next_delay(error, 0.0) == pytest.approx(0.8)
    assert high.next_delay(error, 0.0) == pytest.approx(1.2)


def test_print_config_redacts_a_pem_key_and_leaves_an_unset_one_empty() -> None:
    from otelgpu.config.loader import load
    from otelgpu.config.render import render
    from otelgpu.config.schema import validate
    from otelgpu.service.builtins import builtin_registry

    text = """\
receivers: {nvml: {backend: simulated}}
exporters:
  otlp_http: {endpoint: "https://gw:4318", tls: {cert_pem: CERT, key_pem: KEY-SECRET-TEXT}}
  otlp: {endpoint: "gw:4317"}
service: {pipelines: {metrics: {receivers: [nvml], exporters: [otlp_http, otlp]}}}
"""
    printed = render(validate(load([("p.yaml", text)], environ={}), builtin_registry()))
    assert "KEY-SECRET-TEXT" not in printed
    assert "key_pem: '[REDACTED]'" in printed and "key_pem: ''" in printed
