"""Config of the otlp and otlp_http exporters as `otelgpu validate` and print-config show it:
each error's text and position, the Collector options accepted, the TLS defaults, and how a
proxy's credentials are printed."""

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


def test_collector_habits_encoding_proto_and_tls_insecure_are_accepted_by_otlp_http() -> None:
    config = OtlpHttpExporterConfig.model_validate(
        {"endpoint": "http://gw:4318", "encoding": "proto", "tls": {"insecure": True}}
    )
    assert config.url() == "http://gw:4318/v1/metrics"
    assert config.tls.insecure is True


@pytest.mark.parametrize("tls", [TLSConfig(), HttpTLSConfig()])
def test_tls_defaults_are_the_system_roots_and_no_upper_version(
    tls: TLSConfig | HttpTLSConfig,
) -> None:
    assert (tls.ca_file, tls.ca_pem, tls.cert_file, tls.cert_pem, tls.key_file) == ("",) * 5
    assert not tls.has_pem("ca") and not tls.has_pem("cert") and not tls.has_pem("key")
    assert (tls.min_version, tls.max_version) == ("1.2", "")
    assert (tls.server_name_override, tls.insecure_skip_verify, tls.insecure) == ("", False, False)


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


def test_grpc_endpoint_error_quotes_the_endpoint() -> None:
    with pytest.raises(ValidationError) as info:
        OtlpExporterConfig(endpoint="unix://sock:1")
    assert 'endpoint "unix://sock:1": the scheme must be http:// or https://' in str(info.value)
