"""What an operator must never be misled by: simulated GPUs taken for real ones, a `devices:`
entry that matches nothing, fields a GPU does not support disappearing without a word."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml import receiver as receiver_module
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.real_nvml import RealNvml
from otelgpu.receivers.nvml.receiver import make_client
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from tests.fakes import FakeClock
from tests.unit.receivers.nvml.conftest import MakeReceiver, by_id

LEFTOVER = {"backend": "auto", "simulated": {"gpus": 2}}


def counter_series(telemetry: SelfTelemetry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for metric in telemetry.collect().metrics:
        if metric.name == name:
            for point in metric.points:
                found[tuple(sorted((k, str(v)) for k, v in point.attributes.items()))] = point.value
    return found


def test_auto_keeps_real_nvml_on_a_node_that_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(receiver_module, "nvml_library_present", lambda: True, raising=False)
    client = make_client(NvmlReceiverConfig.model_validate(LEFTOVER), FakeClock())
    assert isinstance(client, RealNvml)  # a leftover simulated: block never wins over NVML


def test_auto_uses_the_block_only_where_nvml_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(receiver_module, "nvml_library_present", lambda: False, raising=False)
    client = make_client(NvmlReceiverConfig.model_validate(LEFTOVER), FakeClock())
    assert isinstance(client, SimulatedNvml)
    forced = NvmlReceiverConfig.model_validate({**LEFTOVER, "backend": "simulated"})
    monkeypatch.setattr(receiver_module, "nvml_library_present", lambda: True)
    assert isinstance(make_client(forced, FakeClock()), SimulatedNvml)  # asked for explicitly


async def test_simulated_resources_are_marked_and_the_log_says_simulated(
    make_receiver: MakeReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = make_receiver(simulated={"gpus": [{"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}]}]})
    with caplog.at_level(logging.INFO):
        batch = await receiver.scrape()
    assert {rm.resource.get("otelgpu.simulated") for rm in batch} == {True}
    assert set(by_id(batch)) == {"GPU-a", "MIG-a1"}
    loud = [r for r in caplog.records if "SIMULATED" in r.getMessage()]
    assert loud and loud[0].levelno >= logging.WARNING


async def test_a_devices_entry_that_matches_no_gpu_is_a_warning_and_a_metric(
    make_receiver: MakeReceiver, telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = make_receiver(devices=[0, 7, "GPU-nope"], simulated={"gpus": 2})
    with caplog.at_level(logging.WARNING):
        batch = await receiver.scrape()
    assert [rm.resource["nvidia.gpu.index"] for rm in batch] == ["0"]
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "7" in warned and "GPU-nope" in warned and "devices" in warned
    counted = counter_series(telemetry, "otelgpu_nvml_unknown_devices_total")
    assert {dict(k)["device"]: v for k, v in counted.items()} == {"7": 1, "GPU-nope": 1}


async def test_unsupported_fields_are_logged_once_at_info_by_name(
    make_receiver: MakeReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    refused = ["NVML_FI_DEV_MEMORY_TEMP", "nvmlDeviceGetEncoderUtilization"]
    receiver = make_receiver(
        simulated={
            "gpus": [
                {"uuid": "GPU-a", "unsupported_fields": refused},
                {"uuid": "GPU-b", "unsupported_fields": refused},
            ]
        }
    )
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            await receiver.scrape()
    said = [r for r in caplog.records if "NVML_FI_DEV_MEMORY_TEMP" in r.getMessage()]
    info = [r.getMessage() for r in said if r.levelno == logging.INFO]
    assert len(info) == 1, info  # once per GPU model, not per GPU nor every cycle
    assert "(2 GPUs)" in info[0] and "nvmlDeviceGetEncoderUtilization" in info[0]
    debug = sorted(r.getMessage() for r in said if r.levelno == logging.DEBUG)
    assert [line.split(" (")[0] for line in debug] == ["GPU GPU-a", "GPU GPU-b"]  # each, once


async def test_a_long_list_of_refused_readings_is_cut_short_at_info(
    make_receiver: MakeReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    refused = [
        "NVML_FI_DEV_MEMORY_TEMP",
        "NVML_FI_DEV_ECC_SBE_VOL_TOTAL",
        "NVML_FI_DEV_ECC_DBE_VOL_TOTAL",
        "NVML_FI_DEV_ECC_SBE_AGG_TOTAL",
        "NVML_FI_DEV_ECC_DBE_AGG_TOTAL",
        "nvmlDeviceGetEncoderUtilization",
    ]
    receiver = make_receiver(
        metric_set="all", simulated={"gpus": [{"uuid": "GPU-a", "unsupported_fields": refused}]}
    )
    with caplog.at_level(logging.DEBUG):
        await receiver.scrape()
    (listed,) = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    names = listed.split("not asked again: ")[1].split(", ")
    assert set(refused) <= set(names)  # the simulated GPU refuses one more of its own
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    line = next(m for m in info if "not asked again" in m)
    assert f"(1 GPU): {len(names)} NVML readings not supported" in line
    assert line.endswith(f"and {len(names) - 4} more (each device's list at DEBUG)")
