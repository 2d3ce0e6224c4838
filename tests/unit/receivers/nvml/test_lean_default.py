"""Lean by default: the default metric set is no larger than dcgm-exporter's default counters
(plus the agent's health and per-holder usage), `metric_set: all` switches everything on,
per-metric switches win over both, and `hw.status` keeps its rules with their inputs off."""

from __future__ import annotations

import inspect
import re

import pytest

from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.receivers.nvml import health
from otelgpu.receivers.nvml.config import MetricSet, NvmlReceiverConfig
from otelgpu.receivers.nvml.dcgm_fields import (
    DCGM_DEFAULT_COUNTERS,
    ON_DCGM,
    default_reason,
    fields_of,
)
from otelgpu.receivers.nvml.metrics import CATALOG, HEALTH_INPUTS
from otelgpu.service.builtins import builtin_registry
from tests.fakes import FakeClock
from tests.unit.receivers.nvml.conftest import MakeReceiver, by_id, metrics, sim

# dcgm-exporter's default counters on a bare-metal H100 SXM: every field of its CSV answers,
# the vGPU licence status as 0 and the XID gauge as 0 (err_code "0") before any XID.
DCGM_SERIES_PER_H100 = len(DCGM_DEFAULT_COUNTERS)
OURS_ONLY = ("nvidia.gpu.up", "hw.status")


def test_every_metric_on_by_default_says_why() -> None:
    unexplained = [s.name for s in CATALOG if s.enabled and not default_reason(s)]
    assert unexplained == []


def test_a_metric_is_on_by_default_for_a_dcgm_default_counter_not_for_another_dcgm_field() -> None:
    for spec in CATALOG:
        if default_reason(spec) == ON_DCGM:
            assert DCGM_DEFAULT_COUNTERS & set(fields_of(spec)), spec.name
        elif fields_of(spec):
            assert not spec.enabled, spec.name


def test_every_dcgm_default_counter_has_a_metric_on_by_default() -> None:
    given = {name for spec in CATALOG if spec.enabled for name in fields_of(spec)}
    assert DCGM_DEFAULT_COUNTERS - given == set()


async def test_default_series_per_gpu_are_no_more_than_dcgm_exporters(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver()  # one simulated H100 SXM (18 NVLinks, GPM), no processes
    await receiver.scrape()
    (gpu,) = by_id(await receiver.scrape()).values()
    series = {name: len(m.points) for name, m in metrics(gpu).items()}
    theirs = sum(n for name, n in series.items() if name not in OURS_ONLY)
    assert theirs <= DCGM_SERIES_PER_H100, series
    assert sum(series.get(name, 0) for name in OURS_ONLY) == 1  # up, with the health on it


async def test_a_gpus_default_series_and_its_holders_are_no_more_than_dcgm_exporters(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver()
    await receiver.scrape()
    (gpu,) = by_id(await receiver.scrape()).values()
    series = {name: len(m.points) for name, m in metrics(gpu).items()}
    holder = 1  # the allocation series k8s_attributes adds for the container holding it
    assert sum(series.values()) + holder <= DCGM_SERIES_PER_H100, series


async def test_the_health_summary_is_on_the_up_series_by_default(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(simulated={"gpus": 2})
    sim(receiver).set_reading(1, "pcie_width", 4)
    found = list(by_id(await receiver.scrape()).values())
    ups = [metrics(gpu)["nvidia.gpu.up"].points for gpu in found]
    summary = ("hw.state", "nvidia.gpu.health.reason")
    assert [(p.value, {k: p.attributes[k] for k in summary}) for (p,) in ups] == [
        (1, {"hw.state": "ok", "nvidia.gpu.health.reason": ""}),
        (1, {"hw.state": "degraded", "nvidia.gpu.health.reason": "pcie_width"}),
    ]
    assert all("hw.status" not in metrics(gpu) for gpu in found)  # opt-in: a series per state


def test_metric_set_all_switches_every_metric_on() -> None:
    config = NvmlReceiverConfig.model_validate({"metric_set": "all"})
    assert config.metric_set is MetricSet.ALL
    assert config.enabled_metrics() == {spec.name for spec in CATALOG}
    assert NvmlReceiverConfig().metric_set is MetricSet.DEFAULT


def test_per_metric_switches_win_over_the_metric_set() -> None:
    everything = NvmlReceiverConfig.model_validate(
        {"metric_set": "all", "metrics": {"nvidia.gpu.nvlink.link.errors": {"enabled": False}}}
    )
    assert everything.enabled_metrics() == {s.name for s in CATALOG} - {
        "nvidia.gpu.nvlink.link.errors"
    }
    lean = NvmlReceiverConfig.model_validate(
        {"metric_set": "default", "metrics": {"nvidia.gpu.nvlink.state": {"enabled": True}}}
    )
    assert lean.enabled_metrics() == {s.name for s in CATALOG if s.enabled} | {
        "nvidia.gpu.nvlink.state"
    }


def test_an_unknown_metric_set_is_a_config_error_naming_the_key() -> None:
    text = """\
receivers:
  nvml: {backend: simulated, metric_set: everything}
exporters:
  debug: {}
service:
  pipelines:
    metrics: {receivers: [nvml], exporters: [debug]}
"""
    with pytest.raises(ConfigError) as info:
        validate(load([("f.yaml", text)], environ={}), builtin_registry())
    assert str(info.value).splitlines() == [
        'f.yaml:2:42: receivers::nvml::metric_set: must be one of: default, all (got "everything")'
    ]


@pytest.mark.parametrize("health", ["nvidia.gpu.up", "hw.status"])
def test_health_inputs_are_read_while_a_health_metric_is_on(health: str) -> None:
    lean = NvmlReceiverConfig()
    assert HEALTH_INPUTS - lean.enabled_metrics()  # some of them are opt-in
    assert lean.read_metrics() == lean.enabled_metrics() | HEALTH_INPUTS
    off = {"nvidia.gpu.up": {"enabled": False}, "hw.status": {"enabled": False}}
    no_health = NvmlReceiverConfig.model_validate({"metrics": off})
    assert no_health.read_metrics() == no_health.enabled_metrics()
    one = NvmlReceiverConfig.model_validate({"metrics": {**off, health: {"enabled": True}}})
    assert one.read_metrics() == one.enabled_metrics() | HEALTH_INPUTS


def test_health_inputs_name_every_metric_the_rules_read() -> None:
    source = inspect.getsource(health.reading_reasons)
    read = set(re.findall(r'"((?:hw|nvidia)\.[a-z_.]+)"', source))
    assert read and read <= HEALTH_INPUTS
    assert HEALTH_INPUTS - read == {"nvidia.gpu.xid.errors"}  # the XID rules read the events


async def test_the_health_summary_keeps_its_rules_while_their_metrics_are_off(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(simulated={"gpus": 3})
    sim(receiver).set_reading(0, "clock_event_reasons", 0x40)  # HW thermal slowdown
    sim(receiver).set_reading(1, "nvlink_down", 5)
    sim(receiver).set_reading(2, "NVML_FI_DEV_REMAPPED_PENDING", 1)
    found = list(by_id(await receiver.scrape()).values())
    reasons = []
    for gpu in found:
        ((current, _),) = [(p.attributes, p.value) for p in metrics(gpu)["nvidia.gpu.up"].points]
        reasons.append((current["hw.state"], current["nvidia.gpu.health.reason"]))
        for name in HEALTH_INPUTS - NvmlReceiverConfig().enabled_metrics():
            assert name not in metrics(gpu), name  # read for the health summary, not emitted
    assert reasons == [
        ("degraded", "clock_hw_thermal"),
        ("degraded", "nvlink_down"),
        ("degraded", "row_remap_pending"),
    ]


def test_the_per_process_metrics_are_opt_in_one_by_one() -> None:
    process = {s.name for s in CATALOG if s.source_kind == "process"}
    assert len(process) == 3
    assert NvmlReceiverConfig().enabled_metrics() & process == set()
    one = NvmlReceiverConfig.model_validate(
        {"processes": True, "metrics": {"nvidia.gpu.process.utilization": {"enabled": True}}}
    )
    assert one.enabled_metrics() & process == {"nvidia.gpu.process.utilization"}
    assert NvmlReceiverConfig.model_validate({"metric_set": "all"}).enabled_metrics() >= process


async def test_nvlink_traffic_is_one_total_by_default_and_per_direction_on_request(
    make_receiver: MakeReceiver, clock: FakeClock
) -> None:
    total = "nvidia.gpu.nvlink.io"
    split = "nvidia.gpu.nvlink.io.by_direction"
    (lean,) = by_id(await make_receiver().scrape()).values()
    assert len(metrics(lean)[total].points) == 1 and split not in metrics(lean)
    both = make_receiver(metrics={split: {"enabled": True}})
    await both.scrape()
    clock.now += 10  # the simulated GPU has sent and received since
    (gpu,) = by_id(await both.scrape()).values()
    (point,) = metrics(gpu)[total].points
    directions = {p.attributes["network.io.direction"]: p.value for p in metrics(gpu)[split].points}
    assert directions.keys() == {"transmit", "receive"}
    assert point.value == sum(directions.values()) > 0


async def test_a_gpu_answering_one_nvlink_direction_has_no_half_total(
    make_receiver: MakeReceiver, clock: FakeClock
) -> None:
    split = "nvidia.gpu.nvlink.io.by_direction"
    receiver = make_receiver(
        metrics={split: {"enabled": True}},
        simulated={"gpus": 1, "unsupported_fields": ["NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX"]},
    )
    await receiver.scrape()
    clock.now += 10
    (gpu,) = by_id(await receiver.scrape()).values()
    assert "nvidia.gpu.nvlink.io" not in metrics(gpu)  # half a counter would read as a reset
    (point,) = metrics(gpu)[split].points
    assert point.attributes["network.io.direction"] == "transmit" and point.value > 0
