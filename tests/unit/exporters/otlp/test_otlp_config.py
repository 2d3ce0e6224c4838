"""Config of the otlp and otlp_http exporters: defaults, validation, secrets."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.exporters.otlp.config import (
    HttpTLSConfig,
    OtlpExporterConfig,
    OtlpHttpExporterConfig,
    TLSConfig,
)
from otelgpu.service.builtins import builtin_registry


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


@pytest.mark.parametrize("tls", [TLSConfig(), HttpTLSConfig()])
def test_tls_defaults_are_the_system_roots_and_no_upper_version(
    tls: TLSConfig | HttpTLSConfig,
) -> None:
    assert (tls.ca_file, tls.ca_pem, tls.cert_file, tls.cert_pem, tls.key_file) == ("",) * 5
    assert not tls.has_pem("ca") and not tls.has_pem("cert") and not tls.has_pem("key")
    assert (tls.min_version, tls.max_version) == ("1.2", "")
    assert (tls.server_name_override, tls.insecure_skip_verify, tls.insecure) == ("", False, False)


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
        (
            OtlpHttpExporterConfig,
            {"retry_on_failure": {"initial_interval": "1s", "max_interval": "500ms"}},
            "max_interval must not be shorter",
        ),
        (OtlpHttpExporterConfig, {"retries": {}}, "Extra inputs"),
    ],
)
def test_invalid_options_are_refused(cls: type, data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        cls.model_validate(data)


SERVICE = "service: {pipelines: {metrics: {receivers: [nvml], exporters: [EXPORTERS]}}}\n"


def _errors(exporters: str, names: str) -> list[str]:
    text = (
        "receivers: {nvml: {backend: simulated}}\nexporters:\n"
        + exporters
        + SERVICE.replace("EXPORTERS", names)
    )
    with pytest.raises(ConfigError) as info:
        validate(load([("p.yaml", text)], environ={}), builtin_registry())
    return str(info.value).splitlines()


def test_validate_names_the_option_its_position_and_what_is_wrong() -> None:
    exporters = """\
  otlp:
    endpoint: "tcp://gw:4317"
  otlp/tls:
    tls: {ca_file: ca.pem, ca_pem: PEM}
  otlp/old:
    tls: {min_version: "1.0", max_version: "1.1"}
"""
    assert _errors(exporters, "otlp, otlp/tls, otlp/old") == [
        'p.yaml:4:15: exporters::otlp::endpoint: endpoint "tcp://gw:4317": the scheme must be '
        "http:// or https://",
        "p.yaml:6:10: exporters::otlp/tls::tls: set ca_file or ca_pem, not both",
        "p.yaml:8:10: exporters::otlp/old::tls: max_version 1.1 is below what gRPC can use: it "
        "runs on HTTP/2, which needs TLS 1.2 or later",
    ]


def test_an_encoding_other_than_proto_is_refused_with_the_value_written() -> None:
    exporters = '  otlp_http: {endpoint: "http://gw:4318", encoding: json}\n'
    assert _errors(exporters, "otlp_http") == [
        'p.yaml:3:14: exporters::otlp_http: encoding: "json" is not supported: requests are '
        "sent as binary protobuf (the Collector's default, encoding: proto); every OTLP/HTTP "
        "receiver accepts it"
    ]


def test_grpc_endpoint_error_quotes_the_endpoint() -> None:
    with pytest.raises(ValidationError) as info:
        OtlpExporterConfig(endpoint="unix://sock:1")
    assert 'endpoint "unix://sock:1": the scheme must be http:// or https://' in str(info.value)


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


def test_collector_habits_encoding_proto_and_tls_insecure_are_accepted_by_otlp_http() -> None:
    config = OtlpHttpExporterConfig.model_validate(
        {"endpoint": "http://gw:4318", "encoding": "proto", "tls": {"insecure": True}}
    )
    assert config.url() == "http://gw:4318/v1/metrics"
    assert config.tls.insecure is True


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


@pytest.mark.parametrize(
    ("proxy", "printed"),
    [
        ("http://user@proxy:3128", "http://user@proxy:3128"),  # no password: nothing to hide
        ("http://proxy:3128", "http://proxy:3128"),
        ("http://user:pw@proxy:3128/x", "http://user:[REDACTED]@proxy:3128/x"),
    ],
)
def test_print_config_hides_only_a_proxy_password(proxy: str, printed: str) -> None:
    config = OtlpHttpExporterConfig(proxy_url=proxy)
    assert config.model_dump(mode="json")["proxy_url"] == printed
    assert config.proxy_url == proxy  # the transport gets the credentials


@pytest.mark.parametrize("proxy", ["socks5://user:pw@proxy:1080", "http://:3128"])
def test_a_proxy_url_needs_an_http_scheme_and_a_host(proxy: str) -> None:
    with pytest.raises(ValidationError, match="expected an http:// or https:// URL of a proxy"):
        OtlpHttpExporterConfig(proxy_url=proxy)


def test_validate_quotes_a_refused_proxy_url_without_its_password() -> None:
    exporters = '  otlp_http: {proxy_url: "socks5://user:s3cret@proxy:1080"}\n'
    assert _errors(exporters, "otlp_http") == [
        'p.yaml:3:26: exporters::otlp_http::proxy_url: "socks5://user:[REDACTED]@proxy:1080": '
        "expected an http:// or https:// URL of a proxy"
    ]


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


@pytest.mark.parametrize(
    ("url", "printed"),
    [
        ("http://user:s3cret@proxy:3128", "http://user:[REDACTED]@proxy:3128"),
        ("user:s3cret@proxy:3128", "user:[REDACTED]@proxy:3128"),  # no scheme, as Go takes it
        ("http://user:s3cret@proxy:3128/path", "http://user:[REDACTED]@proxy:3128/path"),
        ("http://user@proxy:3128", "http://user@proxy:3128"),  # no password to hide
        ("http://proxy:3128", "http://proxy:3128"),
    ],
)
def test_a_proxy_password_is_redacted_with_or_without_a_scheme(url: str, printed: str) -> None:
    from otelgpu.exporters.otlp.config import redact_password

    assert redact_password(url) == printed
