"""What a dcgm-named family says about itself: a ratio DCGM keeps as a double is served as one,
and its HELP text describes the field as served (its unit, no OTel attribute it does not have)."""

from __future__ import annotations

import re

import pytest

from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Batch, Metric, NumberDataPoint, ResourceMetrics
from otelgpu.receivers.nvml.dcgm_names import DCGM_UNITS, NAMING
from otelgpu.receivers.nvml.metrics import CATALOG
from tests.unit.exporters.prometheus.batches import gpu
from tests.unit.exporters.prometheus.test_dcgm_labels import sample
from tests.unit.exporters.prometheus.translators import make_translator

# Every (metric, split value, field) of the naming table.
FIELDS = [
    (metric, value, found)
    for metric, names in NAMING.dcgm.items()
    for value, found in (names.splits.items() if names.split_by else [("", names.field)])
    if found is not None
]
SPECS = {spec.name: spec for spec in CATALOG}
RATIOS = sorted(f.name for _, _, f in FIELDS if DCGM_UNITS[f.name] == "1")


def catalog_batch(value: float) -> Batch:
    """One GPU with a point of `value` for every field of the naming table, each metric as the
    catalog declares it (name, unit, description, kind)."""
    metrics = []
    for metric, split, field in FIELDS:
        spec = SPECS[metric]
        names = NAMING.dcgm[metric]
        attributes = {names.split_by: split} if names.split_by else {}
        if field.value_from:
            attributes[field.value_from] = 79
        metrics.append(
            Metric(
                name=metric,
                unit=spec.unit,
                description=spec.description,
                kind=spec.kind,
                monotonic=spec.monotonic,
                points=(NumberDataPoint(attributes=attributes, time_unix_nano=1, value=value),),
            )
        )
    return Batch([ResourceMetrics(resource=gpu(0), metrics=metrics)])


def body(value: float) -> str:
    store = SeriesStore()
    make_translator("dcgm").ingest(store, catalog_batch(value), now=1.0)
    text, _ = render_text(store.families.values())
    return text


def test_the_ratio_fields_are_every_dcgm_prof_activity_field() -> None:
    assert (
        sorted(
            f.name
            for _, _, f in FIELDS
            if f.name.startswith("DCGM_FI_PROF_") and "BYTES" not in f.name
        )
        == RATIOS
    )
    assert {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY"} <= set(RATIOS)


@pytest.mark.parametrize("field", RATIOS)
def test_a_ratio_dcgm_keeps_as_a_double_is_served_as_a_fraction(field: str) -> None:
    (line,) = [line for line in body(0.37).splitlines() if line.startswith(field + "{")]
    assert float(sample(line)) == pytest.approx(0.37)


# How a HELP text names each dcgm-exporter unit the fields are served in.
UNIT_WORDS = {
    "%": "in %",
    "MiBy": "in MiB",
    "MHz": "in MHz",
    "Cel": "in degrees Celsius",
    "W": "in W",
    "mJ": "in mJ",
    "ns": "in ns",
    "By/s": "bytes per second",
    "By": "bytes",
    "1": "0..1",
}
ATTRIBUTES = {key for spec in CATALOG for key in spec.attributes}


def helps() -> dict[str, str]:
    return dict(re.findall(r"^# HELP (\S+) (.*)$", body(0.5), re.MULTILINE))


@pytest.mark.parametrize("field", sorted(f.name for _, _, f in FIELDS))
def test_a_dcgm_family_says_what_it_serves_in_its_own_unit(field: str) -> None:
    text = helps()[field]
    unit = DCGM_UNITS[field]
    if unit in UNIT_WORDS:
        assert UNIT_WORDS[unit] in text, (field, text)
    if unit != "1":  # served in another unit than the catalog's ratio
        assert not re.search(r"0\.\.1\b|raction", text), (field, text)
    named = [key for key in ATTRIBUTES if key in text]
    assert not named, f"{field}'s help names OTel attributes it does not carry: {named}"


def test_each_field_of_a_split_metric_describes_its_own_part() -> None:
    text = helps()
    assert len(set(text.values())) == len(text)


def test_otel_naming_keeps_the_catalog_description() -> None:
    store = SeriesStore()
    make_translator("otel").ingest(store, catalog_batch(0.5), now=1.0)
    rendered, _ = render_text(store.families.values())
    found = dict(re.findall(r"^# HELP (\S+) (.*)$", rendered, re.MULTILINE))
    assert found["hw_gpu_utilization_ratio"] == SPECS["hw.gpu.utilization"].description


DOUBLES = sorted(f.name for _, _, f in FIELDS if not f.integer and not f.value_from)


def test_the_doubles_are_power_and_the_ratios() -> None:
    assert sorted({"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", *RATIOS}) == DOUBLES


@pytest.mark.parametrize("field", DOUBLES)
def test_a_double_prints_as_dcgm_exporter_prints_it(field: str) -> None:
    (line,) = [line for line in body(0.4946659556).splitlines() if line.startswith(field + "{")]
    assert sample(line) == "0.494666"  # Go's %f: six decimals


def test_a_double_that_is_not_finite_keeps_its_spelling_and_otel_naming_its_digits() -> None:
    (line,) = [
        ln for ln in body(float("nan")).splitlines() if ln.startswith("DCGM_FI_DEV_POWER_USAGE{")
    ]
    assert sample(line) == "NaN"
    store = SeriesStore()
    make_translator("otel").ingest(store, catalog_batch(0.4946659556), now=1.0)
    rendered, _ = render_text(store.families.values())
    (line,) = [ln for ln in rendered.splitlines() if ln.startswith("hw_power_watts{")]
    assert sample(line) == "0.4946659556"
