"""The peerless processors: filter, attributes, resource."""

from __future__ import annotations

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.actions import AttributeAction, apply_actions
from otelgpu.processors.attributes.factory import AttributesProcessor, AttributesProcessorConfig
from otelgpu.processors.filter.factory import FilterProcessor, FilterProcessorConfig
from otelgpu.processors.resource.factory import ResourceProcessor, ResourceProcessorConfig
from tests.conftest import make_settings


def _batch() -> Batch:
    def metric(name: str) -> Metric:
        p = NumberDataPoint(attributes={"code": "79"}, time_unix_nano=1, value=1.0)
        return Metric(name=name, unit="1", description="", kind=MetricKind.GAUGE, points=(p,))

    return (
        ResourceMetrics(
            resource={"hw.id": "GPU-a", "team": "ml"},
            metrics=(metric("hw.gpu.utilization"), metric("nvidia.gpu.clock.sm")),
        ),
        ResourceMetrics(resource={"hw.id": "GPU-b"}, metrics=(metric("nvidia.gpu.clock.sm"),)),
    )


def test_filter_keeps_included_drops_excluded_and_empty_resources(telemetry: SelfTelemetry) -> None:
    config = FilterProcessorConfig.model_validate(
        {"metrics": {"include": ["hw.*"], "exclude": ["hw.energy"]}}
    )
    proc = FilterProcessor(make_settings("filter", Kind.PROCESSOR, telemetry), config)
    out = proc.process(_batch())
    assert [[m.name for m in rm.metrics] for rm in out] == [["hw.gpu.utilization"]]
    dropped = [
        m
        for m in telemetry.collect().metrics
        if m.name == "otelgpu_processor_filtered_points_total"
    ]
    assert dropped[0].points[0].value == 2


def test_filter_with_no_include_keeps_all_but_excluded(telemetry: SelfTelemetry) -> None:
    config = FilterProcessorConfig.model_validate({"metrics": {"exclude": ["nvidia.*"]}})
    proc = FilterProcessor(make_settings("filter", Kind.PROCESSOR, telemetry), config)
    assert [rm.resource["hw.id"] for rm in proc.process(_batch())] == ["GPU-a"]


def test_filter_hands_on_a_resource_it_keeps_whole_as_it_is(telemetry: SelfTelemetry) -> None:
    config = FilterProcessorConfig.model_validate({"metrics": {"include": ["nvidia.*"]}})
    proc = FilterProcessor(make_settings("filter", Kind.PROCESSOR, telemetry), config)
    batch = _batch()
    out = proc.process(batch)
    assert [rm.resource["hw.id"] for rm in out] == ["GPU-a", "GPU-b"]
    assert out[1] is batch[1]  # nothing dropped from it: the same resource
    assert [m.name for m in out[0].metrics] == ["nvidia.gpu.clock.sm"]


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ({"key": "team", "action": "insert", "value": "x"}, {"team": "ml", "hw.id": "GPU-a"}),
        (
            {"key": "cluster", "action": "insert", "value": "eu"},
            {"team": "ml", "hw.id": "GPU-a", "cluster": "eu"},
        ),
        ({"key": "team", "action": "update", "value": "x"}, {"team": "x", "hw.id": "GPU-a"}),
        ({"key": "cluster", "action": "update", "value": "eu"}, {"team": "ml", "hw.id": "GPU-a"}),
        ({"key": "team", "action": "upsert", "value": "x"}, {"team": "x", "hw.id": "GPU-a"}),
        ({"key": "team", "action": "delete"}, {"hw.id": "GPU-a"}),
        (
            {"key": "team", "action": "rename", "new_key": "owner"},
            {"owner": "ml", "hw.id": "GPU-a"},
        ),
        ({"key": "team", "action": "rename", "new_key": "hw.id"}, {"team": "ml", "hw.id": "GPU-a"}),
    ],
)
def test_attribute_actions(action: dict[str, str], expected: dict[str, str]) -> None:
    source = {"team": "ml", "hw.id": "GPU-a"}
    assert apply_actions(source, [AttributeAction.model_validate(action)]) == expected
    assert source == {"team": "ml", "hw.id": "GPU-a"}  # never modified in place


def test_resource_processor_acts_on_resources(telemetry: SelfTelemetry) -> None:
    config = ResourceProcessorConfig.model_validate(
        {"attributes": [{"key": "k8s.cluster.name", "action": "upsert", "value": "prod"}]}
    )
    out = ResourceProcessor(make_settings("resource", Kind.PROCESSOR, telemetry), config).process(
        _batch()
    )
    assert all(rm.resource["k8s.cluster.name"] == "prod" for rm in out)


def test_attributes_processor_acts_on_points(telemetry: SelfTelemetry) -> None:
    config = AttributesProcessorConfig.model_validate(
        {"actions": [{"key": "code", "action": "rename", "new_key": "xid"}]}
    )
    out = AttributesProcessor(
        make_settings("attributes", Kind.PROCESSOR, telemetry), config
    ).process(_batch())
    assert {dict(p.attributes)["xid"] for rm in out for m in rm.metrics for p in m.points} == {"79"}
    assert all("xid" not in rm.resource for rm in out)


def test_processors_without_actions_hand_the_batch_on_as_it_is(telemetry: SelfTelemetry) -> None:
    batch = _batch()
    attributes = AttributesProcessor(
        make_settings("attributes", Kind.PROCESSOR, telemetry),
        AttributesProcessorConfig.model_validate({"actions": []}),
    )
    resource = ResourceProcessor(
        make_settings("resource", Kind.PROCESSOR, telemetry),
        ResourceProcessorConfig.model_validate({"attributes": []}),
    )
    assert attributes.process(batch) is batch
    assert resource.process(batch) is batch


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"key": "k", "action": "insert"}, 'action "insert" needs a "value"'),
        ({"key": "k", "action": "delete", "value": "x"}, 'action "delete" takes no "value"'),
        ({"key": "k", "action": "delete", "new_key": "j"}, '"new_key" goes with action "rename"'),
    ],
)
def test_a_wrong_action_says_which_and_what_it_lacks(action: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AttributeAction.model_validate(action)
