"""`backend: replay`: the config that chooses a recorded board, and the receiver running on it
(a record chosen by name or path, marked as not this node's GPU, a call the record lacks
logged once, a record gone by the time NVML opens reported like a missing driver)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.receiver import NvmlReceiver, make_client
from otelgpu.receivers.nvml.replay import BOARDS, ReplayNvml, shipped_boards
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink
from tests.unit.receivers.nvml.conftest import by_id, config_issues, metrics


def replay_config(**replay: Any) -> NvmlReceiverConfig:
    return NvmlReceiverConfig.model_validate(
        {"backend": "replay", "collection_interval": "10s", "replay": replay}
    )


def receiver(
    config: NvmlReceiverConfig, telemetry: SelfTelemetry, clock: FakeClock
) -> NvmlReceiver:
    settings = make_settings("nvml", Kind.RECEIVER, telemetry)
    return NvmlReceiver(settings, config, Sink(), clock=clock)


def test_the_boards_ship_in_the_package() -> None:
    assert shipped_boards() == ("nvidia-h100", "nvidia-h200")
    assert BOARDS.parent.name == "nvml" and BOARDS.name == "boards"


def test_backend_replay_alone_replays_the_h100_under_load() -> None:
    config = NvmlReceiverConfig.model_validate({"backend": "replay"})
    client = make_client(config, FakeClock())
    assert isinstance(client, ReplayNvml)
    assert (client.path, client.phase) == (BOARDS / "nvidia-h100.json", "load")
    assert config.replay is not None and config.replay.board == "nvidia-h100"  # checked with it


def test_a_board_by_name_and_a_record_by_path(tmp_path: Path) -> None:
    by_name = make_client(replay_config(board="nvidia-h200", phase="idle"), FakeClock())
    assert isinstance(by_name, ReplayNvml)
    assert (by_name.path.name, by_name.phase) == ("nvidia-h200.json", "idle")
    own = tmp_path / "nvml-profile.json"
    shutil.copy(BOARDS / "nvidia-h200.json", own)
    by_path = make_client(replay_config(path=str(own)), FakeClock())
    assert isinstance(by_path, ReplayNvml) and by_path.path == own


@pytest.mark.parametrize(
    ("replay", "error"),
    [
        (
            {"board": "nvidia-a100"},
            "unknown board 'nvidia-a100' (shipped: nvidia-h100, nvidia-h200)",
        ),
        ({"board": "nvidia-h100", "path": "x.json"}, "board and path both choose the record"),
        ({"path": "/nonexistent/rec.json"}, "cannot read the record /nonexistent/rec.json"),
        ({"phase": "burn"}, "has no phase 'burn' (its phases: idle, load)"),
        ({"phases": "load"}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_replay_block_is_refused_with_the_reason(replay: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError) as err:
        replay_config(**replay)
    assert error in str(err.value)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("{not json", "is not a JSON record"),
        ('{"board": "x"}', "is not an NVML record (no 'phases' of recorded calls)"),
        ('{"phases": {"load": {}}}', "is not an NVML record"),
    ],
)
def test_a_record_of_ones_own_that_is_no_record_is_refused(
    tmp_path: Path, content: str, error: str
) -> None:
    path = tmp_path / "record.json"
    path.write_text(content)
    with pytest.raises(ValidationError) as err:
        replay_config(path=str(path))
    assert f"{path} {error}" in str(err.value)


def test_a_replay_block_with_another_backend_is_refused() -> None:
    with pytest.raises(ValidationError) as err:
        NvmlReceiverConfig.model_validate({"backend": "auto", "replay": {"board": "nvidia-h100"}})
    assert "replay: is read only with backend: replay (backend is auto)" in str(err.value)


async def test_replayed_gpus_are_the_board_marked_as_not_this_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    telemetry = SelfTelemetry()
    recv = receiver(replay_config(board="nvidia-h200"), telemetry, FakeClock())
    try:
        (gpu,) = by_id(await recv.scrape()).values()
    finally:
        await recv.shutdown()
    assert gpu.resource["hw.model"] == "NVIDIA H200"
    assert gpu.resource[semconv.SIMULATED] is True
    assert telemetry.sources["nvml"].up is True
    assert any(
        "REPLAYED GPUs: 1 GPUs of NVIDIA H200 answered from the record" in r.message
        and "nvidia-h200.json (phase load)" in r.message
        for r in caplog.records
    )


async def test_a_call_the_record_lacks_is_logged_once_and_the_rest_is_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = json.loads((BOARDS / "nvidia-h100.json").read_text())
    for phase in record["phases"].values():
        phase[:] = [e for e in phase if e["call"] != "temperature"]
    path = tmp_path / "no-temperature.json"
    path.write_text(json.dumps(record))
    telemetry = SelfTelemetry()
    recv = receiver(replay_config(path=str(path)), telemetry, FakeClock())
    try:
        for _ in range(3):
            (gpu,) = by_id(await recv.scrape()).values()
    finally:
        await recv.shutdown()
    warnings = [r.message for r in caplog.records if "the record has no answer" in r.message]
    assert warnings == [
        'replay of no-temperature.json (load): the record has no answer to ["temperature", '
        '"gpu0", []]; answered NVML_ERROR_UNKNOWN'
    ]
    temperatures = {
        p.attributes["hw.sensor_location"] for p in metrics(gpu)["hw.temperature"].points
    }
    assert temperatures == {"memory"}  # the field of the batch still answers
    assert "hw.power" in metrics(gpu)
    errors = [m for m in telemetry.collect().metrics if m.name == "otelgpu_nvml_read_errors_total"]
    assert errors and sum(p.value for m in errors for p in m.points) == 3  # one per cycle


async def test_a_record_gone_when_nvml_opens_is_a_missing_driver_until_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "record.json"
    shutil.copy(BOARDS / "nvidia-h100.json", path)
    config = replay_config(path=str(path))  # validated while it is there
    path.unlink()
    telemetry, clock = SelfTelemetry(), FakeClock()
    recv = receiver(config, telemetry, clock)
    try:
        assert await recv.scrape() == ()
        assert telemetry.sources["nvml"].up is False
        assert f"replay: cannot read the record {path}" in telemetry.sources["nvml"].last_error
        shutil.copy(BOARDS / "nvidia-h100.json", path)
        clock.now += 10  # the first retry
        batch = await recv.scrape()
    finally:
        await recv.shutdown()
    assert batch and telemetry.sources["nvml"].up is True
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_bad_replay_block_names_its_place_in_the_file(tmp_path: Path) -> None:
    nvml = "    backend: replay\n    replay:\n      board: nvidia-a100\n"
    path, issues = config_issues(tmp_path, nvml)
    assert issues == [
        f"{path}:5:7: receivers::nvml::replay: unknown board 'nvidia-a100' (shipped: "
        "nvidia-h100, nvidia-h200); give path: for a record of your own"
    ]


def test_an_xid_the_board_recorded_last_is_answered_once_not_on_every_wait(
    tmp_path: Path,
) -> None:
    record = json.loads((BOARDS / "nvidia-h100.json").read_text())
    waits = [e for e in record["phases"]["load"] if e["call"] == "event_wait"]
    assert len(waits) > 1 and all(e["error"] == nvml.ERROR_TIMEOUT for e in waits)
    last = waits[-1]
    del last["error"], last["message"]
    last["value"] = {"tuple": [{"handle": "gpu0"}, 79]}  # the GPU fell off the bus
    path = tmp_path / "xid-last.json"
    path.write_text(json.dumps(record))
    client = ReplayNvml(path, "load", logging.getLogger("test"))
    client.init()
    answers = []
    for _ in range(len(waits) + 5):
        try:
            handle, code = client.event_wait(None, 0)
        except NvmlError as exc:
            answers.append(exc.code)
        else:
            answers.append((client.uuid(handle), code))
    client.shutdown()
    (uuid,) = {e["value"] for e in record["phases"]["load"] if e["call"] == "uuid"}
    assert (
        answers == [nvml.ERROR_TIMEOUT] * (len(waits) - 1) + [(uuid, 79)] + [nvml.ERROR_TIMEOUT] * 5
    )
