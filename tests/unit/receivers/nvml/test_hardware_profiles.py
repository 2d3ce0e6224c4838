"""The nvml receiver on what real boards answered, replayed: an NVIDIA H200 and an H100 80GB
HBM3, both on driver 580.159.04.

`otelgpu/receivers/nvml/boards/<board>.json` (docs/hardware/ says how each was taken) is
`scripts/nvml_record`'s record of every NVML call the real backend makes on that board, idle and under a matrix-product load; `ProfileNvml` answers
from it. So the receiver's own code meets the board's real shapes, units and error codes in
CI: a change that reads a field in another unit, calls NVML in a way the board never
answered, or mishandles one of its error codes fails here without a GPU.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.metrics import BY_NAME
from otelgpu.receivers.nvml.profile import ProfileNvml, RecordingNvml
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.replay import BOARDS as BOARD_RECORDS
from tests.conftest import make_settings
from tests.fakes import Sink

HARDWARE = BOARD_RECORDS
# board file → (model, GPU memory in bytes, VBIOS), as nvidia-smi -q reports them
BOARDS = {
    "nvidia-h200": ("NVIDIA H200", 150_754_820_096, "96.00.A5.00.1A"),
    "nvidia-h100": ("NVIDIA H100 80GB HBM3", 85_520_809_984, "96.00.CF.00.01"),
}


@pytest.fixture(params=sorted(BOARDS))
def board(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _record(board: str) -> dict[str, Any]:
    return json.loads((HARDWARE / f"{board}.json").read_text())


def _profile(board: str, phase: str) -> ProfileNvml:
    return ProfileNvml(_record(board), phase)


async def _batch(
    client: ProfileNvml, telemetry: SelfTelemetry, cycles: int = 3, **config: Any
) -> list[ResourceMetrics]:
    parsed = NvmlReceiverConfig.model_validate(
        {
            "backend": "nvml",
            "processes": True,
            "metrics": {name: {"enabled": True} for name in BY_NAME},
            **config,
        }
    )
    recv = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, telemetry), parsed, Sink(), client=client
    )
    try:
        for _ in range(cycles):
            batch = await recv.scrape()
    finally:
        await recv.shutdown()
    return list(batch)


def _every(board: str, phase: str, call: str, *args: Any) -> list[Any]:
    """Everything the board answered to `call` with `args` in `phase` (tuples as lists)."""
    return [
        e["value"]["tuple"] if isinstance(e["value"], dict) else e["value"]
        for e in _record(board)["phases"][phase]
        if e["call"] == call and e["args"] == list(args) and "value" in e
    ]


def _gpu(board: str, batch: list[ResourceMetrics]) -> ResourceMetrics:
    (uuid,) = set(_every(board, "idle", "uuid"))
    (gpu,) = [
        rm for rm in batch if rm.resource.get("hw.id") == uuid and "process.pid" not in rm.resource
    ]
    return gpu


def _values(rm: ResourceMetrics, name: str) -> list[float]:
    return [p.value for m in rm.metrics if m.name == name for p in m.points]


@pytest.mark.parametrize("phase", ["idle", "load"])
async def test_every_metric_makes_only_calls_the_board_answered(board: str, phase: str) -> None:
    client = _profile(board, phase)
    telemetry = SelfTelemetry()
    batch = await _batch(client, telemetry)
    # the shipped records were taken before the temperature limits and the T.Limit margin were
    # read: only those calls are missing (scripts/nvml_record records them on the next board)
    assert {json.loads(key)[0] for key in client.unrecorded} == NEWER_THAN_THE_RECORDS
    gpu = _gpu(board, batch)
    model, _memory, vbios = BOARDS[board]
    assert gpu.resource["hw.model"] == model
    assert gpu.resource["hw.driver_version"] == "580.159.04"
    assert gpu.resource["hw.firmware_version"] == vbios
    # every ratio is a ratio, every number a number
    for metric in gpu.metrics:
        for point in metric.points:
            assert math.isfinite(point.value), (metric.name, point)
            if metric.unit == "1":
                assert 0 <= point.value <= 1, (metric.name, point)
    assert telemetry.sources["nvml"].up is True


async def test_units_come_out_as_the_catalog_says(board: str) -> None:
    gpu = _gpu(board, await _batch(_profile(board, "load"), SelfTelemetry()))
    _model, size, _vbios = BOARDS[board]
    memory = _every(board, "load", "memory_info")
    assert {total for *_, total in memory} == {size}  # bytes, as nvidia-smi's MiB say
    assert _values(gpu, "hw.gpu.memory.limit") == [size]
    (used,) = _values(gpu, "hw.gpu.memory.usage")
    assert used > 0 and used in {u for u, *_ in memory}
    (reserved,) = _values(gpu, "nvidia.gpu.memory.reserved")
    assert reserved in {r for _u, _f, r, _t in memory}
    (sm_hz,) = _values(gpu, "nvidia.gpu.sm.clock")  # MHz answered, Hz kept
    assert sm_hz > 1e9 and sm_hz in {m * 1e6 for m in _every(board, "load", "clock", nvml.CLOCK_SM)}
    (mem_hz,) = _values(gpu, "nvidia.gpu.memory.clock")
    assert mem_hz in {m * 1e6 for m in _every(board, "load", "clock", nvml.CLOCK_MEM)}
    busy = max(_values(gpu, "hw.gpu.utilization"))  # the SMs' (encoder, decoder idle): %, a ratio
    assert 0.5 < busy <= 1 and busy * 100 in {b for b, _m in _every(board, "load", "utilization")}
    (power,) = _values(gpu, "hw.power")
    assert 100 < power < 1000  # W (the board answered ~690 000 mW under load)
    (temperature, *_) = _values(gpu, "hw.temperature")
    assert 20 < temperature < 100


async def test_the_process_under_load_is_seen_with_its_memory(board: str) -> None:
    batch = await _batch(_profile(board, "load"), SelfTelemetry())
    ((pid, used),) = [a["tuple"] for a in _every(board, "load", "compute_processes")[-1]]
    (process,) = [rm for rm in batch if "process.pid" in rm.resource]
    assert process.resource["process.pid"] == pid
    assert _values(process, "nvidia.gpu.process.memory.usage") == [used] and used > 0


async def test_what_the_board_refuses_is_remembered_not_asked_again(board: str) -> None:
    client = _profile(board, "idle")
    await _batch(client, SelfTelemetry(), cycles=1)
    first = dict(client.calls)
    await _batch(client, SelfTelemetry(), cycles=1)
    # a PCIe board in a VM: no NVLink; no vGPU licensing on bare metal (NOT_SUPPORTED, 3)
    refused = [
        e for e in _record(board)["phases"]["idle"] if e["call"] == "nvlink_state" and "error" in e
    ]
    assert refused and all(e["error"] == nvml.ERROR_NOT_SUPPORTED for e in refused)
    assert client.calls.get("vgpu_licensed", 0) <= first.get("vgpu_licensed", 0) * 2


async def test_a_nan_that_nvml_answers_for_gpm_is_not_exported(board: str) -> None:
    """Seen on the H200: two GPM samples taken a few milliseconds apart (two scrapes back to
    back) make NVML answer SUCCESS with NaN for DRAM bandwidth; no series may carry it."""
    record = copy.deepcopy(_record(board))
    for entry in record["phases"]["load"]:
        if entry["call"] == "gpm_metrics" and "value" in entry:
            entry["value"] = [{"tuple": [0, math.nan]} for _ in entry["value"]]
    batch = await _batch(ProfileNvml(record, "load"), SelfTelemetry())
    gpu = _gpu(board, batch)
    for metric in gpu.metrics:
        assert all(math.isfinite(p.value) for p in metric.points), metric.name
    assert _values(gpu, "nvidia.gpu.dram.active") == []


async def test_a_record_replays_what_it_recorded(tmp_path: Path) -> None:
    """Round trip on the simulated backend: recorded, replayed, the same points."""
    from otelgpu.receivers.nvml.config import SimulatedConfig
    from otelgpu.receivers.nvml.simulated import SimulatedNvml
    from tests.fakes import FakeClock

    clock = FakeClock()
    recorder = RecordingNvml(SimulatedNvml(SimulatedConfig(), clock.monotonic))
    live = await _batch(recorder, SelfTelemetry(), cycles=1)  # type: ignore[arg-type]
    replayed = await _batch(ProfileNvml(recorder.record()), SelfTelemetry(), cycles=1)

    def seen(batch: list[ResourceMetrics]) -> dict[tuple[str, str], list[float]]:
        return {
            (str(rm.resource.get("hw.id")), m.name): sorted(p.value for p in m.points)
            for rm in batch
            for m in rm.metrics
        }

    assert seen(live) and seen(replayed) == seen(live)


# Default metrics a recorded board has no series for, and what in its record says so.
# Calls the receiver makes (with hw.temperature.limit and nvidia.gpu.temperature.margin on) that
# the shipped records never made: replayed, they answer NVML_ERROR_UNKNOWN and the two series
# are absent.
NEWER_THAN_THE_RECORDS = frozenset({"temperature_threshold", "margin_temperature"})

NOT_ON_THESE_BOARDS = {
    # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_{TX,RX} answered NOT_SUPPORTED: PCIe boards, no NVLink
    "nvidia.gpu.nvlink.io": lambda board: (
        _field_codes(board, 138, 139) == {nvml.ERROR_NOT_SUPPORTED}
    ),
    # no vGPU licensing on bare metal
    "nvidia.gpu.vgpu.license.status": lambda board: (
        {e["error"] for e in _answers(board, "vgpu_licensed")} == {nvml.ERROR_NOT_SUPPORTED}
    ),
    # a series per XID code from the first XID on: no XID happened while recording
    "nvidia.gpu.xid.errors": lambda board: all(
        e.get("error") == nvml.ERROR_TIMEOUT for e in _answers(board, "event_wait")
    ),
}


def _answers(board: str, call: str) -> list[dict[str, Any]]:
    return [e for phase in _record(board)["phases"].values() for e in phase if e["call"] == call]


def _field_codes(board: str, *field_ids: int) -> set[int]:
    return {
        f["fields"]["code"]
        for e in _answers(board, "field_values")
        for f in e["value"]
        if f["fields"]["field_id"] in field_ids
    }


@pytest.mark.parametrize("phase", ["idle", "load"])
async def test_the_default_metric_set_is_served_from_the_every_metric_record(
    board: str, phase: str
) -> None:
    """The default set batches other field and GPM IDs than the every-metric cycles the board
    recorded: each is answered from the board's own answer for that ID."""
    client = _profile(board, phase)
    parsed = NvmlReceiverConfig.model_validate({"backend": "nvml"})
    recv = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, SelfTelemetry()), parsed, Sink(), client=client
    )
    try:
        for _ in range(3):
            batch = await recv.scrape()
    finally:
        await recv.shutdown()
    gpu = _gpu(board, list(batch))
    served = {m.name for m in gpu.metrics if m.points}
    default = parsed.enabled_metrics()
    assert len(default) == 22
    assert sorted(default - served) == sorted(NOT_ON_THESE_BOARDS)
    assert all(holds(board) for holds in NOT_ON_THESE_BOARDS.values())
    assert client.unrecorded == set()
    # what the next recording of the default set (scripts/nvml_record) closes: its batches as
    # it asks them were never recorded, only their IDs one by one
    assert {json.loads(key)[0] for key in client.composed} == {"field_values", "gpm_metrics"}
    # the figures are the board's: the SM clock under load is one it answered
    (power,) = _values(gpu, "hw.power")
    assert power * 1000 in {
        f["fields"]["value"]
        for e in _record(board)["phases"][phase]
        if e["call"] == "field_values"
        for f in e["value"]
        if f["fields"]["field_id"] == 186
    }
    (tensor,) = _values(gpu, "nvidia.gpu.tensor.active")
    if phase == "load":
        assert tensor > 0.5


def test_a_field_the_board_was_never_asked_is_unknown_in_its_entry(board: str) -> None:
    client = _profile(board, "idle")
    (gpu,) = [client.device_handle(0)]
    power, never = client.field_values(gpu, [186, 9999])
    assert power.code == nvml.SUCCESS and power.value > 0
    assert (never.field_id, never.code) == (9999, nvml.ERROR_UNKNOWN)
    assert client.unrecorded == {'["field_values", "gpu0", 9999]'}
