"""The metric catalog agrees with collection, config, the NVML constants and docs/metrics.md."""

from __future__ import annotations

import re
from pathlib import Path

import pynvml
import pytest

from otelgpu.receivers.nvml.dcgm_fields import DCGM_SPLIT, dcgm_name, dcgm_scale, fields_of
from otelgpu.receivers.nvml.docs import render_markdown
from otelgpu.receivers.nvml.limits import LIMIT_READERS
from otelgpu.receivers.nvml.metrics import BY_NAME, CATALOG
from otelgpu.receivers.nvml.parity_reads import POINT_READERS
from otelgpu.receivers.nvml.sources import (
    CALL_READERS,
    FIELD_IDS,
    GPM_METRIC_IDS,
    OTHER_SOURCES,
    Plan,
)

DOCS = Path(__file__).parents[4] / "docs" / "metrics.md"
UCUM = {"1", "{state}", "By", "By/s", "W", "J", "Cel", "Hz", "{error}", "{replay}", "{row}"}
UCUM |= {"s", "{bitmask}", "{page}", "{generation}", "{lane}"}  # fields_parity.py
# dcgm-exporter's default counters (etc/default-counters.csv) that NVML can provide.
DCGM_DEFAULTS = {
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
}  # fmt: skip


def test_names_are_unique_and_well_formed() -> None:
    assert len(BY_NAME) == len(CATALOG)
    for spec in CATALOG:
        assert re.fullmatch(r"(hw|nvidia)\.[a-z0-9_.]+", spec.name), spec.name
        assert spec.unit in UCUM, spec.name
        assert spec.description.endswith((".", ")")), spec.name


def test_every_source_has_exactly_one_way_to_be_read() -> None:
    # One reader per (metric, point attributes): two would write the same series twice.
    call_points = [
        (m, tuple(sorted(a.items())))
        for r in CALL_READERS
        if not r.fallback_for
        for m, a in zip(r.metrics, r.point_attributes(), strict=True)
    ]
    assert len(call_points) == len(set(call_points))
    call_metrics = {m for m, _ in call_points}
    for spec in CATALOG:
        for source in spec.sources:
            kind, _, what = source.partition(":")
            routes = [
                kind == "field" and all(n in FIELD_IDS for n in what.split(",")),
                kind == "call" and spec.name in call_metrics,
                kind == "call"
                and any(spec.name in r.metrics for r in (*POINT_READERS, *LIMIT_READERS)),
                kind == "gpm" and what in GPM_METRIC_IDS,
                kind in OTHER_SOURCES,
            ]
            assert sum(routes) == 1, (spec.name, source)
    assert call_metrics <= set(BY_NAME)


def test_call_readers_name_the_catalog_call() -> None:
    for reader in CALL_READERS:
        if reader.fallback_for:  # stands in for a field (older drivers) or GPM (older GPUs)
            (metric,) = reader.metrics
            spec = BY_NAME[metric]
            if spec.source_kind == "field":  # a field's reader key is its number
                assert reader.fallback_for == f"field:{FIELD_IDS[spec.source_name]}"
            else:
                assert reader.fallback_for == spec.source, reader.key
            assert reader.key.split("(")[0] in spec.description, reader.key
            continue
        for metric in reader.metrics:
            named = [s.partition(":")[2] for s in BY_NAME[metric].sources]
            assert reader.key.split("(")[0] in named, (reader.key, metric)


def test_field_and_gpm_ids_match_nvidia_ml_py() -> None:
    for name, field_id in FIELD_IDS.items():
        assert getattr(pynvml, name) == field_id, name
    for name, metric_id in GPM_METRIC_IDS.items():
        assert getattr(pynvml, name) == metric_id, name


def test_plan_batches_every_enabled_field() -> None:
    plan = Plan.build(frozenset(BY_NAME))
    assert {r.name for r in plan.fields} == set(FIELD_IDS)
    default = Plan.build(frozenset(s.name for s in CATALOG if s.enabled))
    assert "NVML_FI_DEV_POWER_CURRENT_LIMIT" not in {r.name for r in default.fields}


def test_dcgm_defaults_are_covered() -> None:
    covered = {name for spec in CATALOG for name in fields_of(spec)}
    assert covered >= DCGM_DEFAULTS


def test_dcgm_names_of_split_metrics() -> None:
    assert dcgm_name("hw.errors", {"error.type": "uncorrected"}) == (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
    )
    assert dcgm_name("nvidia.gpu.memory.remapped_rows", {"error.type": "corrected"}) == (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"
    )
    assert dcgm_name("hw.power", {}) == "DCGM_FI_DEV_POWER_USAGE"
    assert dcgm_name("nvidia.gpu.up", {}) == ""
    for metric, (key, _) in DCGM_SPLIT.items():
        if metric == "hw.temperature.limit":  # its points are all hw.sensor_location=gpu
            assert BY_NAME[metric].attributes == ("hw.sensor_location", key)
            continue
        assert BY_NAME[metric].attributes == (key,)
    assert dcgm_name(
        "hw.temperature.limit", {"hw.sensor_location": "gpu", "hw.limit_type": "high.degraded"}
    ) == ("DCGM_FI_DEV_SLOWDOWN_TEMP")


@pytest.mark.parametrize(
    ("metric", "scale"),
    [
        ("hw.gpu.utilization", 100.0),
        ("hw.gpu.memory.usage", 1 / 2**20),
        ("nvidia.gpu.sm.clock", 1e-6),
        ("hw.energy", 1000.0),
        ("hw.power", 1.0),
        ("nvidia.gpu.tensor.active", 1.0),
    ],
)
def test_dcgm_scale(metric: str, scale: float) -> None:
    assert dcgm_scale(BY_NAME[metric]) == scale


def test_docs_are_up_to_date() -> None:
    assert DOCS.read_text() == render_markdown(), (
        "docs/metrics.md is stale: python -m otelgpu.receivers.nvml.docs > docs/metrics.md"
    )
    for spec in CATALOG:
        assert f"| `{spec.name}` |" in render_markdown()
