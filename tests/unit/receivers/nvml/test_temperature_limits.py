"""The GPU's own temperature limits: `hw.temperature.limit{hw.limit_type}` from the thresholds
a board answers (read once per GPU while NVML is open), `nvidia.gpu.temperature.margin` from
the margin to its T.Limit (read every cycle), each left out, and never asked again, where the
board refuses it; a replayed record that never made the calls serves everything else."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.counters_select import verdict
from otelgpu.receivers.nvml.dcgm_names import NAMING
from otelgpu.receivers.nvml.replay import BOARDS
from otelgpu.receivers.nvml.simulated import SimHandle
from tests.fakes import FakeClock
from tests.unit.receivers.nvml.conftest import MakeReceiver, by_id, metrics, sim
from tests.unit.receivers.nvml.test_replay_backend import receiver

LIMIT = "hw.temperature.limit"
MARGIN = "nvidia.gpu.temperature.margin"
ON = {LIMIT: {"enabled": True}, MARGIN: {"enabled": True}}
A100 = "NVIDIA A100-SXM4-80GB"


def _limits(rm: object) -> dict[str, float]:
    found = metrics(rm).get(LIMIT)  # type: ignore[arg-type]
    if found is None:
        return {}
    assert {p.attributes["hw.sensor_location"] for p in found.points} == {"gpu"}
    return {str(p.attributes["hw.limit_type"]): p.value for p in found.points}


def _errors(telemetry: SelfTelemetry) -> dict[str, float]:
    for metric in telemetry.collect().metrics:
        if metric.name == "otelgpu_nvml_read_errors_total":
            return {str(p.attributes["source"]): p.value for p in metric.points}
    return {}


async def test_a_board_answering_thresholds_serves_its_limits_read_once(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(metrics=ON, simulated={"gpus": [{"model": A100}]})
    for _ in range(3):
        (gpu,) = by_id(await receiver.scrape()).values()
    assert _limits(gpu) == {"high.critical": 92.0, "high.degraded": 89.0, "max": 85.0}
    assert all(isinstance(v, float) for v in _limits(gpu).values())  # doubles, as hw.temperature
    # static facts: three thresholds asked on the first cycle only, the margin every cycle
    assert sim(receiver).calls["nvmlDeviceGetTemperatureThreshold"] == 3
    assert sim(receiver).calls["nvmlDeviceGetMarginTemperature"] == 3
    (margin,) = metrics(gpu)[MARGIN].points
    (core,) = [p for p in metrics(gpu)["hw.temperature"].points if p.attributes[
        "hw.sensor_location"] == "gpu"]  # fmt: skip
    assert margin.value == 85 - core.value  # to its max operating temperature, the T.Limit


async def test_the_simulated_h100_serves_the_margin_and_refuses_the_thresholds(
    make_receiver: MakeReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    receiver = make_receiver(metrics=ON)  # the default simulated GPU: an H100 SXM
    for _ in range(3):
        (gpu,) = by_id(await receiver.scrape()).values()
    assert LIMIT not in metrics(gpu)
    (margin,) = metrics(gpu)[MARGIN].points
    assert isinstance(margin.value, int) and margin.value > 0
    assert "hw.temperature" in metrics(gpu) and "hw.power" in metrics(gpu)  # the agent goes on
    # each threshold refused once, then never asked again, and said once
    assert sim(receiver).calls["nvmlDeviceGetTemperatureThreshold"] == 3
    told = [r.message for r in caplog.records if "not asked again" in r.message]
    assert len(told) == 1 and told[0].endswith("nvmlDeviceGetTemperatureThreshold"), told


async def test_a_board_refusing_both_calls_serves_neither_series_and_goes_on(
    make_receiver: MakeReceiver, telemetry: SelfTelemetry
) -> None:
    refused = ["nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetMarginTemperature"]
    receiver = make_receiver(
        metrics=ON, simulated={"gpus": [{"model": A100, "unsupported_fields": refused}]}
    )
    for _ in range(3):
        (gpu,) = by_id(await receiver.scrape()).values()
    assert LIMIT not in metrics(gpu) and MARGIN not in metrics(gpu)
    assert "hw.temperature" in metrics(gpu)
    assert sim(receiver).calls["nvmlDeviceGetMarginTemperature"] == 1
    assert sim(receiver).calls["nvmlDeviceGetTemperatureThreshold"] == 3  # each once
    assert _errors(telemetry) == {}  # a refusal is not an error


async def test_a_threshold_that_failed_is_counted_and_asked_again(
    make_receiver: MakeReceiver, telemetry: SelfTelemetry
) -> None:
    receiver = make_receiver(metrics=ON, simulated={"gpus": [{"model": A100}]})
    client = sim(receiver)
    real = client.temperature_threshold
    failing = {"left": 1}

    def threshold(handle: SimHandle, which: int) -> int:
        if failing["left"]:
            failing["left"] -= 1
            raise nvml.NvmlError(nvml.ERROR_UNKNOWN)
        return real(handle, which)

    client.temperature_threshold = threshold  # type: ignore[method-assign]
    (first,) = by_id(await receiver.scrape()).values()
    (second,) = by_id(await receiver.scrape()).values()
    assert _limits(first) == {} and MARGIN in metrics(first)
    assert _limits(second) == {"high.critical": 92.0, "high.degraded": 89.0, "max": 85.0}
    assert _errors(telemetry) == {"nvmlDeviceGetTemperatureThreshold": 1}


async def test_a_record_without_the_calls_replays_everything_else(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = json.loads((BOARDS / "nvidia-h100.json").read_text())
    calls = {e["call"] for phase in record["phases"].values() for e in phase}
    assert not calls & {"temperature_threshold", "margin_temperature"}  # recorded before them
    path = tmp_path / "older.json"
    path.write_text(json.dumps(record))
    config = NvmlReceiverConfig.model_validate(
        {"backend": "replay", "replay": {"path": str(path)}, "metrics": ON}
    )
    telemetry = SelfTelemetry()
    recv = receiver(config, telemetry, FakeClock())
    try:
        for _ in range(2):
            (gpu,) = by_id(await recv.scrape()).values()
    finally:
        await recv.shutdown()
    assert LIMIT not in metrics(gpu) and MARGIN not in metrics(gpu)
    assert {"hw.temperature", "hw.power", "nvidia.gpu.up"} <= set(metrics(gpu))
    warned = [r.message for r in caplog.records if "the record has no answer" in r.message]
    assert len(warned) == 2, warned  # each call named once, however many cycles
    assert '["margin_temperature", "gpu0", []]' in warned[0]
    assert '["temperature_threshold", "gpu0", [0]]' in warned[1]


def test_dcgm_names_and_counters_csv_select_the_limits_and_the_margin() -> None:
    names = NAMING.dcgm[LIMIT]
    assert names.split_by == "hw.limit_type"
    assert {v: f.name for v, f in names.splits.items()} == {
        "high.critical": "DCGM_FI_DEV_SHUTDOWN_TEMP",
        "high.degraded": "DCGM_FI_DEV_SLOWDOWN_TEMP",
        "max": "DCGM_FI_DEV_GPU_MAX_OP_TEMP",
    }
    assert all(f.integer for f in names.splits.values())  # DCGM keeps them as integers
    margin = NAMING.dcgm[MARGIN].field
    assert margin is not None and margin.name == "DCGM_FI_DEV_GPU_TEMP_LIMIT"
    slowdown = verdict("DCGM_FI_DEV_SLOWDOWN_TEMP")
    assert (slowdown.metric, slowdown.key, slowdown.value) == (
        LIMIT,
        "hw.limit_type",
        "high.degraded",
    )
    assert verdict("DCGM_FI_DEV_GPU_TEMP_LIMIT").metric == MARGIN
    memory = verdict("DCGM_FI_DEV_MEM_MAX_OP_TEMP")
    assert not memory.served and "memory" in memory.reason


async def test_a_counters_csv_listing_the_slowdown_limit_serves_that_limit_alone(
    make_receiver: MakeReceiver, tmp_path: Path
) -> None:
    path = tmp_path / "counters.csv"
    path.write_text(
        "DCGM_FI_DEV_SLOWDOWN_TEMP, gauge, slowdown\nDCGM_FI_DEV_GPU_TEMP_LIMIT, gauge, margin\n"
    )
    receiver = make_receiver(counters_csv=str(path), simulated={"gpus": [{"model": A100}]})
    (gpu,) = by_id(await receiver.scrape()).values()
    assert set(metrics(gpu)) == {LIMIT, MARGIN}
    assert _limits(gpu) == {"high.degraded": 89.0}


async def test_a_board_refusing_one_threshold_serves_the_others_and_names_it_once(
    make_receiver: MakeReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = make_receiver(metrics=ON, simulated={"gpus": [{"model": A100}]})
    client = sim(receiver)
    real = client.temperature_threshold

    def threshold(handle: SimHandle, which: int) -> int:
        if which == nvml.TEMPERATURE_THRESHOLD_GPU_MAX:
            raise nvml.NvmlError(nvml.ERROR_NOT_SUPPORTED)
        return real(handle, which)

    client.temperature_threshold = threshold  # type: ignore[method-assign]
    for _ in range(3):
        (gpu,) = by_id(await receiver.scrape()).values()
    assert _limits(gpu) == {"high.critical": 92.0, "high.degraded": 89.0}
    told = [r.message for r in caplog.records if "nvmlDeviceGetTemperatureThreshold" in r.message]
    assert len(told) == 1 and "(index 0): not supported, not asked again" in told[0]
    assert "nvmlDeviceGetTemperatureThreshold(GPU_MAX)" in told[0]
    assert "(SLOWDOWN)" not in told[0] and "(SHUTDOWN)" not in told[0]
