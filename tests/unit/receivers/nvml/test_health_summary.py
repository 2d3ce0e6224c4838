"""`hw.status`, the GPU health summary: each documented rule, the XID hold, and the summary
through the receiver (simulated backend)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from otelgpu.pdata.model import Attributes, NumberDataPoint
from otelgpu.receivers.nvml.devices import IDENTITY_CACHE, Device
from otelgpu.receivers.nvml.health import (
    DEGRADED_XIDS,
    FAILED_XIDS,
    XID_HOLD_S,
    HealthSummary,
    status_points,
)
from tests.fakes import FakeClock
from tests.unit.receivers.nvml.conftest import MakeReceiver, by_id, metrics, sim
from tests.unit.receivers.nvml.test_receiver import wait_for

S = 1_000_000_000  # ns per second


def pt(value: float, **attributes: str | int) -> NumberDataPoint:
    keys = {"reason": "nvidia.gpu.clock.event.reason", "limit": "nvidia.gpu.pcie.link.limit"}
    attrs: Attributes = {keys.get(k, "nvidia.gpu.nvlink.link"): v for k, v in attributes.items()}
    return NumberDataPoint(attributes=attrs, time_unix_nano=1, value=value)


def summary(
    points: Mapping[str, list[NumberDataPoint]],
    xids: Mapping[int, int] | None = None,
    health: HealthSummary | None = None,
    now_ns: int = 100 * S,
) -> tuple[str, str]:
    """(state, reason) of the point with value 1; checks the three-state shape."""
    got = status_points(*(health or HealthSummary()).state("GPU-a", points, xids or {}, now_ns))
    assert [a["hw.state"] for a, _ in got] == ["ok", "degraded", "failed"]
    ((attributes, _),) = [(a, v) for a, v in got if v == 1]
    assert all(a["nvidia.gpu.health.reason"] == "" for a, v in got if v == 0)
    return str(attributes["hw.state"]), str(attributes["nvidia.gpu.health.reason"])


def test_a_healthy_gpu_is_ok() -> None:
    healthy = {
        "nvidia.gpu.memory.row_remap.failure": [pt(0)],
        "nvidia.gpu.clock.event.active": [pt(1, reason="power_cap"), pt(0, reason="hw_thermal")],
        "nvidia.gpu.pcie.link.width": [pt(16, limit="current"), pt(16, limit="max")],
        "nvidia.gpu.pcie.link.generation": [pt(2, limit="current"), pt(5, limit="max")],
        "hw.gpu.utilization": [pt(0.1)],  # idle: a lowered PCIe generation is power saving
        "nvidia.gpu.nvlink.state": [pt(1, link=0), pt(1, link=1)],
    }
    assert summary(healthy, {13: 4, 31: 1}) == ("ok", "")  # application XIDs do not count


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ({"nvidia.gpu.memory.row_remap.failure": [pt(1)]}, ("failed", "row_remap_failure")),
        ({"nvidia.gpu.memory.row_remap.pending": [pt(1)]}, ("degraded", "row_remap_pending")),
        (
            {"nvidia.gpu.memory.retired_pages.pending": [pt(1)]},
            ("degraded", "retired_pages_pending"),
        ),
        (
            {"nvidia.gpu.clock.event.active": [pt(1, reason="hw_thermal")]},
            ("degraded", "clock_hw_thermal"),
        ),
        (
            {"nvidia.gpu.clock.event.active": [pt(1, reason="hw_power_brake")]},
            ("degraded", "clock_hw_power_brake"),
        ),
        (
            {"nvidia.gpu.pcie.link.width": [pt(8, limit="current"), pt(16, limit="max")]},
            ("degraded", "pcie_width"),
        ),
        (
            {
                "nvidia.gpu.pcie.link.generation": [pt(3, limit="current"), pt(5, limit="max")],
                "hw.gpu.utilization": [pt(0.9)],
            },
            ("degraded", "pcie_generation"),
        ),
        (
            {"nvidia.gpu.nvlink.state": [pt(1, link=0), pt(0, link=1)]},
            ("degraded", "nvlink_down"),
        ),
    ],
)
def test_each_reading_rule(
    points: Mapping[str, list[NumberDataPoint]], expected: tuple[str, str]
) -> None:
    assert summary(points) == expected


def test_failed_wins_and_every_reason_is_listed() -> None:
    points = {
        "nvidia.gpu.memory.row_remap.failure": [pt(1)],
        "nvidia.gpu.nvlink.state": [pt(0, link=3)],
    }
    assert summary(points, {79: 1, 94: 2}) == (
        "failed",
        "row_remap_failure,xid_79,nvlink_down,xid_94",
    )


def test_an_xid_holds_its_state_for_the_hold_time_after_it_last_rose() -> None:
    health = HealthSummary()
    start = 1000 * S
    assert summary({}, {79: 1}, health, start) == ("failed", "xid_79")
    hold = int(XID_HOLD_S * S)
    assert summary({}, {79: 1}, health, start + hold) == ("failed", "xid_79")
    assert summary({}, {79: 1}, health, start + hold + S) == ("ok", "")
    # Another XID 79 starts the hold again.
    assert summary({}, {79: 2}, health, start + 2 * hold) == ("failed", "xid_79")
    assert summary({}, {79: 2, 63: 1}, health, start + 2 * hold + S) == (
        "failed",
        "xid_79,xid_63",
    )


async def test_health_through_the_receiver(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(simulated={"gpus": 5}, metrics={"hw.status": {"enabled": True}})
    sim(receiver).set_reading(1, "NVML_FI_DEV_REMAPPED_FAILURE", 1)
    sim(receiver).set_reading(2, "nvlink_down", 5)
    sim(receiver).set_reading(3, "pcie_width", 4)
    sim(receiver).set_reading(3, "clock_event_reasons", 0x40)
    await receiver.scrape()
    sim(receiver).inject_xid(4, 79)  # fallen off the bus
    await wait_for(lambda: receiver._xid is not None and bool(receiver._xid.snapshot()))
    found = list(by_id(await receiver.scrape()).values())
    states = []
    for gpu in found:
        (status,) = [m for m in metrics(gpu).values() if m.name == "hw.status"]
        (current,) = [p.attributes for p in status.points if p.value == 1]
        states.append((current["hw.state"], current["nvidia.gpu.health.reason"]))
        (up,) = metrics(gpu)["nvidia.gpu.up"].points  # the same summary, on one series
        assert up.value == 1 and {k: up.attributes[k] for k in current} == current
    assert states == [
        ("ok", ""),
        ("failed", "row_remap_failure"),
        ("degraded", "nvlink_down"),
        ("degraded", "clock_hw_thermal,pcie_width"),
        ("failed", "xid_79"),
    ]


async def test_health_is_not_emitted_when_switched_off(make_receiver: MakeReceiver) -> None:
    off = {"enabled": False}
    receiver = make_receiver(metrics={"hw.status": off, "nvidia.gpu.up": off})
    (gpu,) = by_id(await receiver.scrape()).values()
    assert not {"hw.status", "nvidia.gpu.up"} & metrics(gpu).keys()


def _documented_xids(state: str) -> set[int]:
    doc = Path(__file__).parents[4] / "docs" / "migrating-from-dcgm-exporter.md"
    (row,) = [
        line
        for line in doc.read_text().splitlines()
        if line.startswith(f"| `xid_<code>` | {state} |")
    ]
    rule = row.split("|")[3].split("(")[0]
    codes: set[int] = set()
    # "144\u2013150" (an en dash) is a range.
    for first, last in re.findall(r"(\d+)(?:\u2013(\d+))?", rule):
        codes |= set(range(int(first), int(last or first) + 1))
    return codes


def test_the_documented_xid_classes_are_the_code_s() -> None:
    assert _documented_xids("failed") == FAILED_XIDS
    assert _documented_xids("degraded") == DEGRADED_XIDS
    assert not FAILED_XIDS & DEGRADED_XIDS


@pytest.mark.parametrize("status", [False, True])
async def test_the_health_attributes_are_built_once_not_each_cycle(
    make_receiver: MakeReceiver, clock: FakeClock, status: bool
) -> None:
    """A device keeps its points' attributes with hw.id added per attribute dict: a health
    summary built anew each cycle would grow that cache by one entry (three with hw.status)
    every cycle, for as long as the agent runs."""
    receiver = make_receiver(
        simulated={"gpus": [{"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}]}, {"uuid": "GPU-b"}]},
        metrics={"hw.status": {"enabled": status}},
    )
    sim(receiver).set_reading(1, "pcie_width", 4)  # GPU-b degraded, GPU-a ok
    sizes = []
    for cycle in range(30):
        await receiver.scrape()
        clock.now += 10
        if cycle in (4, 29):
            assert receiver._devices is not None
            sizes.append([len(d._with_identity) for d in receiver._devices])
    assert sizes[0] == sizes[1]


def test_a_device_keeps_a_bounded_number_of_attribute_dicts() -> None:
    """Whatever source builds its attribute dicts anew, the device's cache stays bounded."""
    device = Device(handle=None, index=0, uuid="GPU-a", resource={"hw.type": "gpu"})
    for i in range(3 * IDENTITY_CACHE):
        assert device.point_attributes({"k": i}) == {"hw.id": "GPU-a", "hw.type": "gpu", "k": i}
        assert len(device._with_identity) <= IDENTITY_CACHE
    same = {"k": "x"}
    assert device.point_attributes(same) is device.point_attributes(same)  # built once
