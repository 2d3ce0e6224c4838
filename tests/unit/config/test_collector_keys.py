"""A Collector config pasted as it is: each key the agent does not take gets an answer of its
own (accepted with a positioned warning where it is harmless, refused with what to write
instead otherwise), near misses get a "did you mean", and every warning says where."""

from __future__ import annotations

import logging
import re

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.schema import AgentConfig, validate
from otelgpu.service.builtins import builtin_registry
from tests.unit.config.pipelines import MINIMAL

_POSITIONED = re.compile(r"^f1\.yaml:\d+:\d+: ")


def _validated(text: str) -> AgentConfig:
    return validate(load([("f0.yaml", MINIMAL), ("f1.yaml", text)], environ={}), builtin_registry())


def _issues(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _validated(text)
    return [f"{'::'.join(map(str, i.path))}: {i.message}" for i in info.value.issues]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_batch_and_memory_limiter_are_accepted_as_no_ops_with_a_positioned_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = """
processors:
  batch: {send_batch_size: 8192, timeout: 200ms}
  memory_limiter/node: {check_interval: 1s, limit_mib: 100}
service:
  pipelines:
    metrics: {processors: [memory_limiter/node, batch]}
"""
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    config = _validated(text)
    (pipeline,) = config.pipelines.values()
    assert pipeline.processors == ()
    assert Kind.PROCESSOR not in config.components or not config.components[Kind.PROCESSOR]
    warnings = _warnings(caplog)
    batch = [w for w in warnings if "processors::batch:" in w]
    limiter = [w for w in warnings if "processors::memory_limiter/node:" in w]
    assert len(batch) == 1 and len(limiter) == 1, warnings
    assert _POSITIONED.match(batch[0]) and _POSITIONED.match(limiter[0])
    assert "the Collector's batch processor is a no-op here" in batch[0]
    assert "size the container's memory limit instead" in limiter[0]


def test_harmless_collector_exporter_keys_are_accepted_with_a_positioned_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = """
exporters:
  prometheus: {endpoint: "0.0.0.0:9400", enable_open_metrics: true, add_metric_suffixes: true}
  otlp:
    endpoint: gateway:4317
    sending_queue: {block_on_overflow: true}
  otlp_http:
    endpoint: http://gateway:4318
    sending_queue: {block_on_overflow: true}
service:
  pipelines:
    metrics: {exporters: [prometheus, otlp, otlp_http]}
"""
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    _validated(text)
    warnings = _warnings(caplog)
    for path, says in [
        ("prometheus::enable_open_metrics", "enable_open_metrics has no effect here"),
        ("prometheus::add_metric_suffixes", "add_metric_suffixes: metric names always"),
        ("otlp::sending_queue::block_on_overflow", "block_on_overflow has no effect here"),
        ("otlp_http::sending_queue::block_on_overflow", "block_on_overflow has no effect here"),
    ]:
        (found,) = [w for w in warnings if f"exporters::{path}:" in w]
        assert _POSITIONED.match(found) and says in found, found


def test_a_refused_action_value_is_positioned_at_the_value_an_option_at_its_key() -> None:
    text = """
processors:
  attributes:
    actions:
      - {key: user, action: hash}
      - {key: team, from_attribute: k8s.namespace.name, action: insert}
service:
  pipelines:
    metrics: {processors: [attributes]}
"""
    with pytest.raises(ConfigError) as info:
        _validated(text)
    where = {"::".join(map(str, i.path)): (i.line, i.column) for i in info.value.issues}
    assert where["processors::attributes::actions::0::action"] == (5, 29)  # at "hash"
    assert where["processors::attributes::actions::1::from_attribute"] == (6, 21)  # at the key


def test_a_collector_key_is_recognised_only_where_the_collector_puts_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = """
exporters:
  otlp:
    endpoint: gateway:4317
    sending_queue: [{block_on_overflow: true}]
service:
  pipelines:
    metrics: {exporters: [otlp]}
"""
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    (issue,) = _issues(text)  # a list where the queue's options go: that is the error
    assert issue.startswith("exporters::otlp::sending_queue: "), issue
    assert not [w for w in _warnings(caplog) if "block_on_overflow" in w]


def test_collector_keys_that_cannot_be_honoured_say_what_to_do_instead() -> None:
    text = """
processors:
  attributes:
    actions:
      - {key: team, from_attribute: k8s.namespace.name, action: insert}
      - {key: user, action: hash}
      - {key: count, action: convert, converted_type: int}
      - {key: bad, action: nope}
exporters:
  prometheus: {endpoint: "0.0.0.0:9400", add_metric_suffixes: false}
  otlp: {endpoint: "gateway:4317", compression: zstd}
  otlp_http: {endpoint: "http://gateway:4318", compression: zstd}
service:
  pipelines:
    metrics: {processors: [attributes], exporters: [prometheus, otlp, otlp_http]}
"""
    issues = _issues(text)
    assert len(issues) == 7, issues
    by_path = {i.split(": ", 1)[0]: i.split(": ", 1)[1] for i in issues}
    # each refused item is stood in for, so the next item keeps its index and its own error
    assert by_path.pop("processors::attributes::actions::3::action").startswith("must be one of")
    for issue in by_path.values():
        assert "unknown key" not in issue and "must be one of" not in issue, issue
    assert "value" in by_path["processors::attributes::actions::0::from_attribute"]
    assert "delete" in by_path["processors::attributes::actions::1::action"]
    assert "converted_type" in by_path["processors::attributes::actions::2::action"]
    assert "suffix" in by_path["exporters::prometheus::add_metric_suffixes"]
    assert by_path["exporters::otlp::compression"].startswith(
        'compression "zstd" is not supported on OTLP/gRPC here: use gzip'
    )
    assert by_path["exporters::otlp_http::compression"].startswith(
        'compression "zstd" is not supported on OTLP/HTTP here: use gzip'
    )


def test_an_unknown_type_lists_the_valid_ones_and_suggests_only_names_of_its_kind() -> None:
    # otlphttp is an exporter's (deprecated) name: no receiver is suggested for it
    text = (
        "receivers:\n  otlphttp: {}\nservice:\n  pipelines:\n    metrics: {receivers: [otlphttp]}\n"
    )
    (issue,) = _issues(text)
    types = builtin_registry().types(Kind.RECEIVER)
    assert issue == (
        f'receivers::otlphttp: unknown receiver type "otlphttp" (valid: {", ".join(types)})'
    )


@pytest.mark.parametrize(
    ("text", "path", "suggestion"),
    [
        (
            'exporters:\n  prometheus: {endpoint: "0.0.0.0:9400", namming: dcgm}\n'
            "service:\n  pipelines:\n    metrics: {exporters: [prometheus]}\n",
            "exporters::prometheus::namming",
            "naming",
        ),
        (
            "exporters:\n  promethues: {}\n"
            "service:\n  pipelines:\n    metrics: {exporters: [promethues]}\n",
            "exporters::promethues",
            "prometheus",
        ),
        (
            "receivers:\n  nvml:\n    metrics: {hw.gpu.utilisation: {enabled: true}}\n",
            "receivers::nvml::metrics",
            "hw.gpu.utilization",
        ),
    ],
    ids=["key", "component type", "metric name"],
)
def test_a_near_miss_gets_a_did_you_mean(text: str, path: str, suggestion: str) -> None:
    (issue,) = _issues(text)
    assert issue.startswith(f"{path}: ")
    assert f'did you mean "{suggestion}"?' in issue
    assert len(issue) < 300, issue  # not every valid name


def test_an_unknown_key_in_a_nested_section_lists_that_sections_keys() -> None:
    text = (
        "exporters:\n  otlp:\n    endpoint: gw:4317\n    sending_queue: {bogus: 1}\n"
        "service:\n  pipelines:\n    metrics: {exporters: [otlp]}\n"
    )
    assert _issues(text) == [
        "exporters::otlp::sending_queue::bogus: unknown key (valid keys: drain_timeout, "
        "enabled, num_consumers, queue_size, sizer)"
    ]


def test_tab_indentation_gets_a_hint() -> None:
    text = "receivers:\n\tnvml: {}\n"
    with pytest.raises(ConfigError) as info:
        load([("t.yaml", text)], environ={})
    (issue,) = info.value.issues
    assert (issue.line, issue.column) == (2, 1)
    assert "tab" in issue.message and "spaces" in issue.message


@pytest.mark.parametrize(("written", "read"), [("0", 0), ('"0"', "0"), ("GPU-abc", "GPU-abc")])
def test_devices_takes_a_single_index_or_uuid(written: str, read: int | str) -> None:
    config = _validated(f"receivers:\n  nvml: {{devices: {written}}}\n")
    (nvml,) = config.components[Kind.RECEIVER].values()
    assert nvml.devices == [read]  # type: ignore[attr-defined]


def test_every_bad_const_labels_name_is_reported() -> None:
    text = """
exporters:
  prometheus:
    endpoint: "0.0.0.0:9400"
    const_labels: {"bad-name": a, good: b, "9lives": c, "x y": d}
service:
  pipelines:
    metrics: {exporters: [prometheus]}
"""
    (issue,) = _issues(text)
    for name in ("bad-name", "9lives", "x y"):
        assert f'"{name}"' in issue
    assert '"good"' not in issue


def test_config_warnings_name_their_position(caplog: pytest.LogCaptureFixture) -> None:
    text = """
receivers:
  kubeletstats: {collection_interval: 20s}
exporters:
  otlphttp: {endpoint: "http://gateway:4318"}
service:
  pipelines:
    metrics: {receivers: [nvml], exporters: [debug, otlphttp]}
"""
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    _validated(text)
    warnings = _warnings(caplog)
    assert len(warnings) == 3, warnings  # two deprecated aliases, one unused receiver
    for warning in warnings:
        assert _POSITIONED.match(warning), warning


@pytest.mark.parametrize(
    ("tls", "key", "line"),
    [
        ("{min_version: '1.3'}", "min_version", "tls::min_version 1.3 / max_version (none)"),
        ("{max_version: '1.2'}", "max_version", "tls::min_version 1.2 / max_version 1.2"),
    ],
)
def test_a_tls_version_range_grpc_cannot_enforce_is_warned_about_at_its_position(
    caplog: pytest.LogCaptureFixture, tls: str, key: str, line: str
) -> None:
    text = f"""
exporters:
  otlp:
    endpoint: gateway:4317
    tls: {tls}
service:
  pipelines:
    metrics: {{exporters: [otlp]}}
"""
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    _validated(text)
    (found,) = [w for w in _warnings(caplog) if "cannot be enforced" in w]
    assert _POSITIONED.match(found), found
    assert f"exporters::otlp::tls::{key}: {line} cannot be enforced on gRPC" in found


def test_a_plaintext_grpc_endpoint_has_no_tls_version_to_warn_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = """
exporters:
  otlp:
    endpoint: http://gateway:4317
    tls: {min_version: '1.3'}
service:
  pipelines:
    metrics: {exporters: [otlp]}
"""
    caplog.set_level(logging.WARNING, logger="otelgpu.config")
    _validated(text)
    assert not [w for w in _warnings(caplog) if "cannot be enforced" in w]
