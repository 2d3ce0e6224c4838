"""The simulated NVML's memory: the processes' memory is part of the device's used memory, so
on every device (a GPU or a MIG instance) sum(process memory) <= used <= total - reserved."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otelgpu.receivers.nvml.config import SimulatedConfig
from otelgpu.receivers.nvml.simulated import SimHandle, SimulatedNvml

GiB = 1 << 30

_profiles = st.builds(
    lambda slices, gb: f"{slices}g.{gb}gb",
    st.integers(min_value=1, max_value=7),
    st.sampled_from([5, 10, 20, 40, 80]),
)
_processes = st.lists(
    st.fixed_dictionaries(
        {
            "pid": st.integers(min_value=1, max_value=1 << 22),
            "used_memory": st.integers(min_value=0, max_value=200 * GiB),
        }
    ),
    max_size=6,
)
_gpus = st.lists(
    st.fixed_dictionaries(
        {
            "memory": st.integers(min_value=0, max_value=160 * GiB),
            "mig": st.lists(st.builds(lambda p: {"profile": p}, _profiles), max_size=3),
            "processes": _processes,
        }
    ),
    min_size=1,
    max_size=3,
)


def _devices(client: SimulatedNvml) -> list[SimHandle]:
    handles = []
    for index in range(client.device_count()):
        handle = client.device_handle(index)
        handles += [handle, *(m.handle for m in client.mig_instances(handle))]
    return handles


@settings(max_examples=200, deadline=None)
@given(gpus=_gpus, elapsed=st.floats(min_value=0, max_value=3600))
def test_processes_never_hold_more_than_their_device_uses(
    gpus: list[dict[str, Any]], elapsed: float
) -> None:
    now = [1000.0]
    client = SimulatedNvml(SimulatedConfig.model_validate({"gpus": gpus}), lambda: now[0])
    client.init()
    now[0] += elapsed
    for handle in _devices(client):
        used, free, reserved, total = client.memory_info(handle)
        held = [memory for _, memory in client.compute_processes(handle)]
        assert min([used, free, reserved, *held], default=0) >= 0
        assert used + free + reserved == total
        assert sum(held) <= used <= total - reserved, (handle, held, used, total)
        configured = [p["used_memory"] for p in gpus[handle.gpu]["processes"]]
        if held:  # only ever scaled down, never up
            assert all(h <= c for h, c in zip(held, configured, strict=True))


def test_processes_that_fit_keep_their_memory_and_the_device_counts_it() -> None:
    config = SimulatedConfig.model_validate(
        {"gpus": [{"memory": "80GiB", "processes": [{"pid": 7, "used_memory": "60GiB"}]}]}
    )
    now = [0.0]
    client = SimulatedNvml(config, lambda: now[0])
    client.init()
    handle = client.device_handle(0)
    for step in range(0, 120, 5):  # a whole load wave: low load too
        now[0] = float(step)
        assert client.compute_processes(handle) == [(7, 60 * GiB)]
        used, _, _, _ = client.memory_info(handle)
        assert used >= 60 * GiB


def test_processes_asking_for_more_than_a_mig_instance_holds_are_scaled_down() -> None:
    config = SimulatedConfig.model_validate(
        {
            "gpus": [
                {
                    "memory": "80GiB",
                    "mig": [{"profile": "1g.10gb"}, {"profile": "3g.40gb"}],
                    "processes": [
                        {"pid": 1, "used_memory": "15GiB"},
                        {"pid": 2, "used_memory": "5GiB"},
                    ],
                }
            ]
        }
    )
    client = SimulatedNvml(config, lambda: 0.0)
    client.init()
    gpu = client.device_handle(0)
    first, second = (m.handle for m in client.mig_instances(gpu))
    _, _, reserved, total = client.memory_info(first)
    usable = total - reserved
    processes = client.compute_processes(first)
    assert [pid for pid, _ in processes] == [1, 2]
    assert processes[0][1] == 3 * processes[1][1]  # in proportion to what they asked for
    assert usable - 2 <= sum(m for _, m in processes) <= usable
    assert client.memory_info(first)[0] == usable  # the instance is full
    assert client.compute_processes(gpu) == processes  # the GPU answers for its instances
    assert client.compute_processes(second) == []
