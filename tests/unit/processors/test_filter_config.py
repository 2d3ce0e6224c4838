"""The filter processor's config: the contrib forms it refuses, with the message and position a
user reads, and what its strict and regexp name forms keep and drop."""

from __future__ import annotations

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.filter.factory import FilterProcessor, FilterProcessorConfig
from tests.conftest import make_settings
from tests.unit.config.pipelines import refusals, through

PIPELINE = through("filter")
NAMES = ("hw.gpu.utilization", "hw.gpu.memory.usage", "nvidia.gpu.clock.sm")


def _errors(text: str) -> list[str]:
    return refusals(PIPELINE, text)


def _kept(metrics: dict[str, object], telemetry: SelfTelemetry) -> list[str]:
    config = FilterProcessorConfig.model_validate({"metrics": metrics})
    processor = FilterProcessor(make_settings("filter", Kind.PROCESSOR, telemetry), config)
    point = NumberDataPoint(attributes={}, time_unix_nano=1, value=1.0)
    batch = (
        ResourceMetrics(
            resource={"hw.id": "GPU-a"},
            metrics=tuple(
                Metric(name=n, unit="1", description="", kind=MetricKind.GAUGE, points=(point,))
                for n in NAMES
            ),
        ),
    )
    return [m.name for rm in processor.process(batch) for m in rm.metrics]


EXPR = (
    "match_type expr (expressions) is not supported: match metric names with strict, regexp "
    "or globs"
)


def test_match_type_expr_alone_is_refused_as_the_expr_form() -> None:
    text = """processors:
  filter:
    metrics:
      include:
        match_type: expr
        metric_names: [hw.gpu.utilization]
"""
    assert _errors(text) == [f"f.yaml:5:9: processors::filter::metrics::include: {EXPR}"]


def test_expressions_without_match_type_are_refused_as_the_expr_form() -> None:
    text = """processors:
  filter:
    metrics:
      exclude:
        expressions: ['MetricName == "hw.gpu.utilization"']
"""
    assert _errors(text) == [f"f.yaml:5:9: processors::filter::metrics::exclude: {EXPR}"]


def test_the_ottl_error_mode_is_refused_as_the_contrib_processors() -> None:
    text = """processors:
  filter:
    error_mode: ignore
    metrics:
      include: [hw.*]
"""
    assert _errors(text) == [
        "f.yaml:3:5: processors::filter: OTTL conditions (error_mode) are the contrib filter "
        "processor's; otelgpu's filter matches metric names only: use include/exclude with "
        "globs, or the contrib form {match_type: strict|regexp, metric_names: [...]}"
    ]


def test_resource_attributes_are_refused_with_what_to_do_instead() -> None:
    text = """processors:
  filter:
    metrics:
      include:
        match_type: strict
        metric_names: [hw.gpu.utilization]
        resource_attributes: [{key: team, value: ml}]
"""
    assert _errors(text) == [
        "f.yaml:5:9: processors::filter::metrics::include: resource_attributes is not supported "
        "by otelgpu's filter (it matches metric names only); drop the key or filter after export"
    ]


def test_an_invalid_regexp_is_refused_naming_the_pattern_at_its_position() -> None:
    text = """processors:
  filter:
    metrics:
      include:
        match_type: regexp
        metric_names: ["hw\\\\.gpu\\\\..*", "nvidia.(clock"]
"""
    assert _errors(text) == [
        "f.yaml:6:23: processors::filter::metrics::include::metric_names: invalid regular "
        'expression "nvidia.(clock": missing ), unterminated subpattern at position 7'
    ]


def test_strict_names_are_compared_whole_never_read_as_patterns(telemetry: SelfTelemetry) -> None:
    include = {"match_type": "strict", "metric_names": ["hw.gpu.utilization", "hw.gpu", "x.(y"]}
    assert _kept({"include": include}, telemetry) == ["hw.gpu.utilization"]
    exclude = {"match_type": "strict", "metric_names": ["nvidia.gpu.clock.sm", "hw.gpu"]}
    assert _kept({"exclude": exclude}, telemetry) == ["hw.gpu.utilization", "hw.gpu.memory.usage"]


def test_a_regexp_matches_anywhere_in_the_name(telemetry: SelfTelemetry) -> None:
    include = {"match_type": "regexp", "metric_names": ["clock"]}
    assert _kept({"include": include}, telemetry) == ["nvidia.gpu.clock.sm"]
    exclude = {"match_type": "regexp", "metric_names": ["memory", "^nvidia"]}
    assert _kept({"exclude": exclude}, telemetry) == ["hw.gpu.utilization"]
