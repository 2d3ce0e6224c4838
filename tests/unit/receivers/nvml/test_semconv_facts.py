"""Every emitted otel name, type, unit and attribute agrees with the semantic conventions.

The conventions' facts the receiver relies on are kept in `semconv_facts.yaml` (with the commit
they were read at); this test holds what the receiver emits against them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from otelgpu import __version__
from otelgpu.exporters.otlp.encode import encode
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Metric, MetricKind, ResourceMetrics
from otelgpu.receivers.nvml.metrics import CATALOG
from tests.unit.receivers.nvml.conftest import MakeReceiver, sim
from tests.unit.receivers.nvml.test_receiver import wait_for

FACTS: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parents[4] / "otelgpu/receivers/nvml/semconv_facts.yaml").read_text()
)
ALL_ON = {spec.name: {"enabled": True} for spec in CATALOG}


def instrument(metric: Metric) -> str:
    if metric.kind is MetricKind.GAUGE:
        return "gauge"
    return "counter" if metric.monotonic else "updowncounter"


@pytest.fixture
async def emitted(make_receiver: MakeReceiver) -> list[ResourceMetrics]:
    receiver = make_receiver(
        metrics=ALL_ON,
        simulated={
            "gpus": [
                {"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}]},
                {"uuid": "GPU-b", "model": "NVIDIA A100-SXM4-80GB"},  # answers its limits
            ]
        },
    )
    await receiver.scrape()  # GPM primes
    sim(receiver).inject_xid(0, 48)
    await wait_for(lambda: receiver._xid is not None and bool(receiver._xid.snapshot()))
    return list(await receiver.scrape())


def test_the_table_names_its_source() -> None:
    assert FACTS["schema_url"].startswith("https://opentelemetry.io/schemas/1.")
    assert (
        "open-telemetry/semantic-conventions @ "
        in (Path(__file__).parents[4] / "otelgpu/receivers/nvml/semconv_facts.yaml").read_text()
    )


def test_every_hw_metric_is_a_convention_metric_with_its_type_and_unit(
    emitted: list[ResourceMetrics],
) -> None:
    seen = set()
    for rm in emitted:
        for metric in rm.metrics:
            if not metric.name.startswith("hw."):
                # Our own names stay out of the conventions' namespace.
                assert metric.name.startswith("nvidia."), metric.name
                continue
            fact = FACTS["metrics"].get(metric.name)
            assert fact is not None, f"{metric.name} is not in the conventions"
            assert instrument(metric) == fact["instrument"], metric.name
            assert metric.unit == fact["unit"], metric.name
            seen.add(metric.name)
    hw_specs = {spec.name for spec in CATALOG if spec.name.startswith("hw.")}
    assert seen == hw_specs  # the check above ran for every hw metric of the catalog


def test_points_carry_the_required_attributes_with_convention_values(
    emitted: list[ResourceMetrics],
) -> None:
    enums = FACTS["enums"]
    for rm in emitted:
        for metric in rm.metrics:
            fact = FACTS["metrics"].get(metric.name)
            if fact is None:
                continue
            attributes = fact.get("attributes", {})
            required = [k for k, lvl in FACTS["common_attributes"].items() if lvl == "required"]
            required += [k for k, lvl in attributes.items() if lvl == "required"]
            allowed = {*FACTS["common_attributes"], *attributes, "hw.type"}
            allowed |= set(FACTS.get("extensions", {}).get(metric.name, ()))
            for point in metric.points:
                for key in required:
                    assert key in point.attributes, (metric.name, key)
                assert point.attributes["hw.id"] == rm.resource["hw.id"]
                assert point.attributes["hw.type"] == "gpu"
                for key, value in point.attributes.items():
                    assert key in allowed, (metric.name, key)
                    members = fact.get("values", {}).get(key) or enums.get(key)
                    if members is not None:
                        assert value in members, (metric.name, key, value)


def test_utilization_and_memory_utilization_mean_what_the_conventions_say(
    emitted: list[ResourceMetrics],
) -> None:
    gpu = next(rm for rm in emitted if rm.resource["hw.id"] == "GPU-b")
    by_name = {m.name: m for m in gpu.metrics}
    (used,) = by_name["hw.gpu.memory.usage"].points
    (limit,) = by_name["hw.gpu.memory.limit"].points
    (fraction,) = by_name["hw.gpu.memory.utilization"].points
    assert fraction.value == used.value / limit.value  # memory used, not memory-busy time
    tasks = {p.attributes["hw.gpu.task"] for p in by_name["hw.gpu.utilization"].points}
    assert tasks == set(FACTS["enums"]["hw.gpu.task"])
    assert not any("encoder" in m or "decoder" in m for m in by_name)  # no invented metrics


def test_resource_attributes_use_the_convention_names(emitted: list[ResourceMetrics]) -> None:
    gpu = next(rm for rm in emitted if rm.resource["hw.id"] == "GPU-a")
    for key in ("hw.driver_version", "hw.serial_number", "hw.firmware_version"):
        assert key in FACTS["gpu_attributes"]
        assert gpu.resource[key], key
    hw_keys = {k for rm in emitted for k in rm.resource if k.startswith("hw.")}
    known = {*FACTS["common_attributes"], *FACTS["gpu_attributes"], "hw.type"}
    assert hw_keys <= known, hw_keys - known


def test_schema_url_and_scope_version_are_set(emitted: list[ResourceMetrics]) -> None:
    assert FACTS["schema_url"] == semconv.SCHEMA_URL
    for rm in emitted:
        assert rm.schema_url == FACTS["schema_url"]
        assert rm.scope_version == __version__ != ""


def test_otlp_carries_updowncounters_and_point_identity(emitted: list[ResourceMetrics]) -> None:
    request = encode(tuple(emitted))
    gpus: set[str] = set()
    for out in request.resource_metrics:
        scope = out.scope_metrics[0]
        assert scope.scope.version == __version__
        for metric in scope.metrics:
            fact = FACTS["metrics"].get(metric.name)
            if fact is not None and fact["instrument"] == "updowncounter":
                assert metric.WhichOneof("data") == "sum", metric.name
                assert not metric.sum.is_monotonic, metric.name
            data = getattr(metric, metric.WhichOneof("data"))
            for point in data.data_points:
                attrs = {a.key: a.value.string_value for a in point.attributes}
                assert attrs["hw.type"] == "gpu"
                gpus.add(attrs["hw.id"])
    # Without resource attributes, the points alone still tell every device apart.
    assert gpus == {"GPU-a", "MIG-a1", "GPU-b"}


def test_values_have_the_conventions_value_type(emitted: list[ResourceMetrics]) -> None:
    """`hw.temperature` and `hw.temperature.limit` are doubles, though NVML answers whole
    degrees: on the wire too."""
    typed = {name: f["value_type"] for name, f in FACTS["metrics"].items() if "value_type" in f}
    assert typed == {"hw.temperature": "double", "hw.temperature.limit": "double"}
    seen = set()
    for rm in emitted:
        for metric in rm.metrics:
            if metric.name in typed:
                assert all(type(p.value) is float for p in metric.points), metric
                seen.add(metric.name)
    assert seen == set(typed)
    for out in encode(tuple(emitted)).resource_metrics:
        for metric in out.scope_metrics[0].metrics:
            if metric.name in typed:
                points = metric.gauge.data_points
                assert points and all(p.WhichOneof("value") == "as_double" for p in points)


def test_memory_error_classes_are_the_conventions_corrected_and_uncorrected(
    emitted: list[ResourceMetrics],
) -> None:
    """Every memory error metric tells its classes apart as hw.errors does (`error.type`
    corrected / uncorrected), remapped rows as well as ECC errors and retired pages."""
    classes = set(FACTS["metrics"]["hw.errors"]["values"]["error.type"])
    memory = ("hw.errors", "nvidia.gpu.memory.remapped_rows", "nvidia.gpu.memory.retired_pages")
    for name in memory:
        found = {
            p.attributes["error.type"]
            for rm in emitted
            for m in rm.metrics
            if m.name == name
            for p in m.points
        }
        assert found == classes, (name, found)
