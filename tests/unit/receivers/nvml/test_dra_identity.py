"""What DRA names a GPU by, on the nvml resources: the minor number and MIG placement start.

The real backend is driven through the fake nvidia-ml-py module of test_real_backend (real
ctypes structures, real call signatures); discovery through both backends.
"""

from __future__ import annotations

import logging
import sys

import pytest

from otelgpu.pdata import semconv
from otelgpu.receivers.nvml.config import SimulatedConfig
from otelgpu.receivers.nvml.devices import discover
from otelgpu.receivers.nvml.nvml import ERROR_NOT_SUPPORTED
from otelgpu.receivers.nvml.real_nvml import RealNvml
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from tests.unit.receivers.nvml.test_real_backend import GPU0, FakePynvml, two_gpus

LOG = logging.getLogger("test")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakePynvml:
    module = FakePynvml(two_gpus())
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


@pytest.fixture
def client(fake: FakePynvml) -> RealNvml:
    opened = RealNvml()
    opened.init()
    return opened


def test_real_backend_reads_minor_and_gpu_instance_placement(
    fake: FakePynvml, client: RealNvml
) -> None:
    fake.devices[GPU0].minor = 3
    fake.devices[GPU0 + 3].placement_start = 4  # the 3g instance (GPU instance 2)
    found = {d.uuid: d.resource for d in discover(client, "all", "host-a", LOG)}
    assert found["GPU-aaaa"][semconv.GPU_MINOR] == "3"
    assert found["MIG-3333"][semconv.GPU_MINOR] == "3"  # its parent's
    assert found["MIG-3333"][semconv.MIG_PLACEMENT_START] == "4"
    assert ("nvmlDeviceGetGpuInstanceById", (GPU0, 2)) in fake.calls


def test_nvml_refusing_them_leaves_them_out_and_nothing_else(
    fake: FakePynvml, client: RealNvml
) -> None:
    fake.fail["nvmlDeviceGetMinorNumber"] = ERROR_NOT_SUPPORTED
    fake.fail["nvmlDeviceGetGpuInstanceById"] = 4  # NO_PERMISSION: not root
    found = {d.uuid: d.resource for d in discover(client, "all", "host-a", LOG)}
    assert set(found) == {"GPU-aaaa", "MIG-1111", "MIG-3333", "GPU-bbbb"}
    assert not any(
        semconv.GPU_MINOR in r or semconv.MIG_PLACEMENT_START in r for r in found.values()
    )


def test_simulated_minor_defaults_to_the_index_and_placements_follow_profiles() -> None:
    config = SimulatedConfig.model_validate(
        {"gpus": [{"mig": [{"profile": "2g.20gb"}, {"profile": "1g.10gb"}]}, {"minor": 7}]}
    )
    sim = SimulatedNvml(config, lambda: 0.0)
    sim.init()
    resources = [d.resource for d in discover(sim, "all", "host-a", LOG)]
    assert [r[semconv.GPU_MINOR] for r in resources] == ["0", "0", "0", "7"]
    assert [r.get(semconv.MIG_PLACEMENT_START) for r in resources] == [None, "0", "2", None]
