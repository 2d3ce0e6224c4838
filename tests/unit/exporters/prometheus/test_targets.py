"""Which family a metric's points go to (targets.py): the naming table only in dcgm naming and
only in its unit, the remembered target per descriptor field, per-point targets of a split
metric, and the samples' text and completeness."""

from __future__ import annotations

import math

from otelgpu.exporters.prometheus.targets import Targets
from otelgpu.exporters.prometheus.value_text import Target
from otelgpu.pdata.model import AttrValue, Metric, MetricKind, NumberDataPoint
from otelgpu.pdata.naming import DcgmField, DcgmNames, NamingTable

TASK = "hw.gpu.task"
UTIL = DcgmField("DCGM_FI_DEV_GPU_UTIL", scale=100.0, integer=True)
ENC = DcgmField("DCGM_FI_DEV_ENC_UTIL", scale=100.0, integer=True)
NAMES = NamingTable(
    dcgm={
        "hw.gpu.utilization": DcgmNames(
            "1", split_by=TASK, splits={"general": UTIL, "encoder": ENC}
        ),
        "hw.gpu.busy": DcgmNames(
            "1", split_by=TASK, splits={"general": DcgmField("BUSY"), "encoder": DcgmField("ENC")}
        ),
        "hw.gpu.memory.usage": DcgmNames("By", DcgmField("DCGM_FI_DEV_FB_USED", 1 / 1048576, True)),
        "hw.errors": DcgmNames("{error}", DcgmField("XID", type="gauge", value_from="xid")),
    }
)


def point(value: object, attributes: dict[str, AttrValue] | None = None) -> NumberDataPoint:
    return NumberDataPoint(attributes=attributes or {}, time_unix_nano=1, value=value)  # type: ignore[arg-type]


def metric(
    name: str,
    *points: NumberDataPoint,
    unit: str = "W",
    kind: MetricKind = MetricKind.GAUGE,
    monotonic: bool = False,
    description: str = "d",
) -> Metric:
    return Metric(
        name=name,
        unit=unit,
        description=description,
        kind=kind,
        points=points,
        monotonic=monotonic,
    )


def dcgm() -> Targets:
    return Targets("dcgm", "", NAMES)


def test_otel_naming_ignores_the_naming_table() -> None:
    targets = Targets("otel", "", NAMES)
    memory = metric("hw.gpu.memory.usage", point(2.0), unit="By")
    assert targets.of(memory) == Target("hw_gpu_memory_usage_bytes", "gauge", "d")
    assert not targets.is_split(metric("hw.gpu.utilization", point(0.5), unit="1"))


def test_dcgm_naming_uses_the_table_only_in_its_unit() -> None:
    targets = dcgm()
    memory = targets.of(metric("hw.gpu.memory.usage", point(2.0), unit="By"))
    assert (memory.name, memory.scale, memory.integer) == ("DCGM_FI_DEV_FB_USED", 1 / 1048576, True)
    other_unit = metric("hw.gpu.memory.usage", point(2.0), unit="KiBy")
    assert targets.of(other_unit).name == "hw_gpu_memory_usage_kibibytes"
    assert targets.is_split(metric("hw.gpu.utilization", point(0.5), unit="1"))
    assert not targets.is_split(metric("hw.gpu.utilization", point(0.5), unit="%"))


def test_a_namespace_prefixes_every_family() -> None:
    targets = Targets("dcgm", "gpu", NAMES)
    assert targets.of(metric("hw.power", point(1.0))).name == "gpu_hw_power_watts"
    assert targets.of(metric("hw.errors", point(1.0), unit="{error}")).name == "gpu_XID"


def test_a_field_declares_its_own_type_and_else_the_metric_kind_decides() -> None:
    targets = dcgm()
    errors = metric("hw.errors", point(1.0), unit="{error}", kind=MetricKind.SUM, monotonic=True)
    assert targets.of(errors) == Target("XID", "gauge", "d", value_from="xid")
    energy = metric("hw.energy", point(1.0), unit="J", kind=MetricKind.SUM, monotonic=True)
    assert targets.of(energy).type == "counter"
    updown = metric("hw.level", point(1.0), unit="J", kind=MetricKind.SUM)
    assert targets.of(updown).type == "gauge"
    assert targets.of(metric("hw.power", point(1.0))).type == "gauge"


def test_a_target_is_remembered_per_descriptor_and_made_again_when_a_field_changes() -> None:
    targets = dcgm()
    base = metric("hw.energy", point(1.0), unit="J", kind=MetricKind.SUM, monotonic=True)
    first = targets.of(base)
    assert first == Target("hw_energy_joules_total", "counter", "d")
    assert targets.of(base) is first
    changed = {
        "kind": metric("hw.energy", point(1.0), unit="J", monotonic=True),
        "monotonic": metric("hw.energy", point(1.0), unit="J", kind=MetricKind.SUM),
        "unit": metric("hw.energy", point(1.0), unit="kJ", kind=MetricKind.SUM, monotonic=True),
        "description": metric(
            "hw.energy", point(1.0), unit="J", kind=MetricKind.SUM, monotonic=True, description="e"
        ),
    }
    expected = {
        "kind": Target("hw_energy_joules", "gauge", "d"),
        "monotonic": Target("hw_energy_joules", "gauge", "d"),
        "unit": Target("hw_energy_kJ_total", "counter", "d"),
        "description": Target("hw_energy_joules_total", "counter", "e"),
    }
    for field, changed_metric in changed.items():
        assert targets.of(base) == first, field
        assert targets.of(changed_metric) == expected[field], field


def test_each_point_of_a_split_metric_has_its_own_target() -> None:
    targets = dcgm()
    util = metric(
        "hw.gpu.utilization",
        point(0.25, {TASK: "general"}),
        point(0.5, {TASK: "encoder"}),
        point(0.75, {TASK: "other"}),  # no field: the otel name
        point("n/a", {TASK: "general"}),  # not a number: left out
        unit="1",
    )
    busy = metric("hw.gpu.busy", point(0.5, {TASK: "general"}), unit="1")
    for _ in range(2):  # remembered targets give the same answer
        (samples, other) = targets.samples((util, busy))
        assert samples.target is None and samples.complete  # each sample has its own target
        assert [(s.target.name, s.target.drop, s.attributes, s.text) for s in samples.samples] == [
            ("DCGM_FI_DEV_GPU_UTIL", TASK, ((TASK, "general"),), "25\n"),
            ("DCGM_FI_DEV_ENC_UTIL", TASK, ((TASK, "encoder"),), "50\n"),
            ("hw_gpu_utilization_ratio", "", ((TASK, "other"),), "0.75\n"),
        ]
        assert [s.target.name for s in other.samples] == ["BUSY"]


def test_samples_are_each_number_point_s_text_and_its_attributes() -> None:
    targets = Targets("otel", "", NAMES)
    power = metric(
        "hw.power",
        point(2.5, {"a": "1"}),
        point(7),
        point(True),
        point(math.inf),
        point(-math.inf),
        point(math.nan),
        point(0.0),
    )
    (samples,) = targets.samples((power,))
    assert samples.complete and samples.target == Target("hw_power_watts", "gauge", "d")
    assert [(s.attributes, s.text) for s in samples.samples] == [
        ((("a", "1"),), "2.5\n"),
        ((), "7\n"),
        ((), "1.0\n"),
        ((), "+Inf\n"),
        ((), "-Inf\n"),
        ((), "NaN\n"),
        ((), "0.0\n"),
    ]


def test_a_scaled_target_scales_floats_too() -> None:
    (samples,) = dcgm().samples((metric("hw.gpu.memory.usage", point(3 * 1048576.0), unit="By"),))
    assert [s.text for s in samples.samples] == ["3\n"]


def test_points_that_are_no_numbers_are_left_out_and_the_metric_is_incomplete() -> None:
    targets = Targets("otel", "", NAMES)
    power = metric("hw.power", point(1.5), point("n/a"), point(None), point(2.5))
    (samples,) = targets.samples((power,))
    assert not samples.complete
    assert [s.text for s in samples.samples] == ["1.5\n", "2.5\n"]


def test_a_metric_whose_data_cannot_be_read_has_no_samples() -> None:
    targets = Targets("otel", "", NAMES)
    broken = metric("hw.power")
    broken.points = None  # type: ignore[assignment]
    power = metric("hw.power", point(1.5))
    out = targets.samples((broken, power))
    assert [(s.metric, s.target, s.samples, s.complete) for s in out[:1]] == [
        (broken, None, [], False)
    ]
    assert [s.text for s in out[1].samples] == ["1.5\n"]
