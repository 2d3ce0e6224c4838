"""What an operator must never be misled by: simulated GPUs taken for real ones, a `devices:`
entry that matches nothing, fields a GPU does not support disappearing without a word."""

from __future__ import annotations

import logging

import pytest

from otelgpu.receivers.nvml import receiver as receiver_module
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.real_nvml import RealNvml
from otelgpu.receivers.nvml.receiver import make_client
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from otelgpu.telemetry import SelfTelemetry
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
    receiver = make_receiver(
        simulated={
            "gpus": [
                {
                    "uuid": "GPU-a",
                    "unsupported_fields": [
                        "NVML_FI_DEV_MEMORY_TEMP",
                        "nvmlDeviceGetEncoderUtilization",
                    ],
                }
            ]
        }
    )
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            await receiver.scrape()
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.INFO and "NVML_FI_DEV_MEMORY_TEMP" in r.getMessage()
    ]
    assert len(lines) == 1, lines  # once, not every cycle
    assert "GPU-a" in lines[0] and "nvmlDeviceGetEncoderUtilization" in lines[0]
