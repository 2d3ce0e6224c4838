"""The simulated NVML: deterministic, shaped like the real library's answers and errors."""

from __future__ import annotations

import threading

import pytest

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import SimulatedConfig
from otelgpu.receivers.nvml.real_nvml import mig_profile
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from otelgpu.receivers.nvml.sources import FIELD_IDS


def _readings(client: SimulatedNvml, index: int) -> tuple[object, ...]:
    handle = client.device_handle(index)
    fields = client.field_values(handle, list(FIELD_IDS.values()))
    return (
        client.utilization(handle),
        client.memory_info(handle),
        client.clock(handle, nvml.CLOCK_SM),
        client.temperature(handle),
        [(f.field_id, f.code, f.value) for f in fields],
    )


def test_readings_are_a_function_of_time_and_index() -> None:
    now = [100.0]
    a = SimulatedNvml(SimulatedConfig(gpus=2), lambda: now[0])
    b = SimulatedNvml(SimulatedConfig(gpus=2), lambda: now[0])
    a.init()
    b.init()
    now[0] += 17
    assert _readings(a, 0) == _readings(b, 0)
    assert _readings(a, 0) != _readings(a, 1)  # GPUs are phase-shifted
    before = _readings(a, 0)
    now[0] += 13
    assert _readings(a, 0) != before  # the load moves with time


def test_counters_only_grow() -> None:
    now = [0.0]
    client = SimulatedNvml(SimulatedConfig(gpus=1), lambda: now[0])
    client.init()
    handle = client.device_handle(0)
    energy = FIELD_IDS["NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    seen = []
    for _ in range(5):
        now[0] += 7
        seen.append(client.field_values(handle, [energy])[0].value)
    assert seen == sorted(seen) and seen[0] < seen[-1]


def test_errors_carry_nvml_codes() -> None:
    now = [0.0]
    config = SimulatedConfig.model_validate(
        {"gpus": [{"lost_after": "5s", "mig": [{}]}], "library_missing": 1}
    )
    client = SimulatedNvml(config, lambda: now[0])
    with pytest.raises(nvml.NvmlError) as err:
        client.init()
    assert err.value.code == nvml.ERROR_LIBRARY_NOT_FOUND
    client.init()
    handle = client.device_handle(0)
    (mig,) = client.mig_instances(handle)
    with pytest.raises(nvml.NvmlError) as err:
        client.utilization(mig.handle)
    assert err.value.code == nvml.ERROR_NOT_SUPPORTED  # as on real MIG devices
    with pytest.raises(nvml.NvmlError) as err:
        client.device_handle(5)
    assert err.value.code == nvml.ERROR_NOT_FOUND
    now[0] += 5
    with pytest.raises(nvml.NvmlError) as err:
        client.memory_info(handle)
    assert err.value.code == nvml.ERROR_GPU_IS_LOST


def test_event_wait_times_out_like_nvml() -> None:
    client = SimulatedNvml(SimulatedConfig(gpus=1), lambda: 0.0)
    client.init()
    event_set = client.event_set_create()
    client.register_xid_events(client.device_handle(0), event_set)
    with pytest.raises(nvml.NvmlError) as err:
        client.event_wait(event_set, 1)
    assert err.value.code == nvml.ERROR_TIMEOUT
    client.inject_xid(0, 94)
    handle, code = client.event_wait(event_set, 1)
    assert (client.uuid(handle), code) == (client.uuid(client.device_handle(0)), 94)


def test_event_wait_blocks_until_an_xid_comes_or_the_wait_is_ended() -> None:
    """As NVML's `nvmlEventSetWait`: with no event a wait blocks (for its timeout, not a short
    poll of the simulator's own), so an idle XID thread makes one wait per event; a watcher
    that stops ends the wait at once (`end_event_wait`)."""
    client = SimulatedNvml(SimulatedConfig(gpus=1), lambda: 0.0)
    client.init()
    event_set = client.event_set_create()
    client.register_xid_events(client.device_handle(0), event_set)
    answers: list[object] = []

    def wait_for_events() -> None:
        while True:
            try:
                handle, code = client.event_wait(event_set, 600_000)  # ten minutes
            except nvml.NvmlError as exc:
                answers.append(exc.code)
                return
            answers.append((client.uuid(handle), code))

    def waits(n: int) -> None:  # until the thread is inside its n-th wait (bounded)
        for _ in range(1000):
            if client.calls["nvmlEventSetWait"] >= n:
                return
            threading.Event().wait(0.01)

    waiter = threading.Thread(target=wait_for_events, daemon=True)
    waiter.start()
    waits(1)
    client.inject_xid(0, 79)
    waits(2)
    client.end_event_wait(event_set)
    waiter.join(30)
    assert not waiter.is_alive()
    gpu = client.uuid(client.device_handle(0))
    assert answers == [(gpu, 79), nvml.ERROR_TIMEOUT]
    assert client.calls["nvmlEventSetWait"] == 2  # one wait per event, and the ended one
    with pytest.raises(nvml.NvmlError):  # an ended event set has no more waits to block
        client.event_wait(event_set, 600_000)


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "1g.10gb"),
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "3g.20gb"),
        ("NVIDIA H100 80GB HBM3", ""),
    ],
)
def test_mig_profile_from_the_device_name(name: str, profile: str) -> None:
    assert mig_profile(name) == profile
