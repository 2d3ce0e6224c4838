"""`naming: dcgm` against the nvml receiver's catalog, the naming table it fills and
dcgm-exporter's units."""

from __future__ import annotations

import re

import pytest

from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata.model import Metric, MetricKind
from otelgpu.receivers.nvml import dcgm_fields, dcgm_names
from otelgpu.receivers.nvml import metrics as catalog
from otelgpu.receivers.nvml.dcgm_names import NAMING
from tests.unit.exporters.prometheus.batches import batch, gpu
from tests.unit.exporters.prometheus.translators import make_translator

_SPECS_WITH_DCGM = [s for s in catalog.CATALOG if dcgm_fields.fields_of(s)]


def test_the_catalog_names_dcgm_fields() -> None:
    assert len(_SPECS_WITH_DCGM) >= 10


@pytest.mark.parametrize("spec", _SPECS_WITH_DCGM, ids=lambda s: s.name)
def test_every_catalog_dcgm_name_renders_with_a_known_unit(spec: catalog.MetricSpec) -> None:
    for name in dcgm_fields.fields_of(spec):
        assert re.fullmatch(r"DCGM_FI_[A-Z0-9_]+", name), name
        assert name in dcgm_names.DCGM_UNITS, f"{name}: add dcgm-exporter's unit to DCGM_UNITS"
        factor = dcgm_names.conversion(spec.unit, name)  # KeyError = unit mismatch
        # The catalog carries its own factor for exporters; both readings must agree.
        assert factor == pytest.approx(dcgm_fields.dcgm_scale(spec)), name


@pytest.mark.parametrize("spec", _SPECS_WITH_DCGM, ids=lambda s: s.name)
def test_every_catalog_metric_is_in_the_naming_table(spec: catalog.MetricSpec) -> None:
    """The table the nvml receiver's factory hands to exporters names every split."""
    names = NAMING.dcgm[spec.name]
    assert names.unit == spec.unit
    split = dcgm_fields.DCGM_SPLIT.get(spec.name)
    choices = [{split[0]: value} for value in split[1]] if split else [{}]
    for attributes in choices:
        found = names.of(attributes)
        assert found is not None
        assert found.name == dcgm_fields.dcgm_name(spec.name, attributes)


def test_metrics_without_a_dcgm_name_keep_their_otel_name() -> None:
    spec = catalog.BY_NAME["nvidia.gpu.process.memory.usage"]
    assert spec.dcgm == "" and spec.name not in NAMING.dcgm
    metric = Metric(name=spec.name, unit=spec.unit, description="", kind=spec.kind, points=())
    assert (
        make_translator("dcgm").target(metric, {}).name == "nvidia_gpu_process_memory_usage_bytes"
    )


def test_without_the_receivers_table_dcgm_naming_has_no_dcgm_names() -> None:
    """The exporter knows no receiver: a metric no table names keeps its otel name."""
    store = SeriesStore()
    Translator("dcgm", {}).ingest(store, batch(gpu(0)), now=1.0)
    assert "hw_power_watts" in store.families and "DCGM_FI_DEV_POWER_USAGE" not in store.families


def served(naming: str) -> dict[str, tuple[str, float]]:
    store = SeriesStore()
    make_translator(naming).ingest(store, batch(gpu(0), utilization=0.42), now=1.0)
    text, _ = render_text(store.families.values())
    values = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            name, rest = line.split("{", 1)
            labels, value = rest.rsplit("} ", 1)
            values[name] = (labels, float(value))
    return values


def test_dcgm_values_are_in_dcgm_units() -> None:
    values = served("dcgm")
    assert values["DCGM_FI_DEV_GPU_UTIL"][1] == pytest.approx(42.0)  # percent
    assert values["DCGM_FI_DEV_FB_USED"][1] == 2048  # MiB
    assert values["DCGM_FI_DEV_SM_CLOCK"][1] == 1980  # MHz
    assert values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][1] == 1_234_500  # mJ
    assert values["DCGM_FI_DEV_POWER_USAGE"][1] == 312.5  # W
    assert values["DCGM_FI_DEV_GPU_TEMP"][1] == 41  # °C
    assert values["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"][1] == 3
    assert values["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"][1] == 1
    # The attribute that chose the dcgm field is not repeated as a label.
    assert "error_type" not in values["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"][0]


def test_otel_values_keep_otel_units() -> None:
    values = served("otel")
    assert values["hw_gpu_utilization_ratio"][1] == pytest.approx(0.42)
    assert values["hw_gpu_memory_usage_bytes"][1] == 2 * 2**30
    assert values["nvidia_gpu_sm_clock_hertz"][1] == 1_980_000_000
    assert values["hw_energy_joules_total"][1] == 1234.5


def test_dcgm_counters_are_declared_as_counters() -> None:
    store = SeriesStore()
    make_translator("dcgm").ingest(store, batch(gpu(0)), now=1.0)
    assert store.families["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].type == "counter"
    assert store.families["DCGM_FI_DEV_GPU_UTIL"].type == "gauge"
    assert catalog.BY_NAME["hw.energy"].kind is MetricKind.SUM
