"""The simulated backend's answers for the readings in `fields_parity.py` (mixed into
`SimulatedNvml`): clock events, NVLink links and errors, PCIe link, vGPU licence, perf-policy
and ECC/retired-page fields, GPM weights.

Readings are deterministic functions of (time since init, GPU index, load), as the rest of the
simulation. An H100/H200/B200-class model has 18 NVLinks, an A100 12, anything with "PCIe" in
its name none. A simulated GPU runs on bare metal, so the vGPU licence is NOT_SUPPORTED.
`set_reading` overrides one reading on one GPU, so tests can make a GPU unhealthy.
"""

from __future__ import annotations

from collections.abc import Mapping

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.simulated_gpus import SimGpu, SimHandle, SimulatedGpus

# GPM: the simulated % (or MiB/s) at full load per metric id, beyond the base weights.
PARITY_GPM_WEIGHTS: Mapping[int, float] = {
    3: 0.7,  # SM occupancy
    11: 0.05,  # FP64
    12: 0.4,  # FP32
    13: 0.3,  # FP16
    20: 200.0,  # PCIe TX: 20 000 MiB/s at full load
    21: 400.0,  # PCIe RX
    60: 2500.0,  # NVLink RX: 250 000 MiB/s
    61: 2500.0,  # NVLink TX
}
_IDLE, _POWER_CAP = 0x1, 0x4


def nvlink_count(model: str) -> int:
    """How many NVLinks a simulated GPU of `model` has."""
    if "PCIe" in model:
        return 0
    return 12 if "A100" in model else 18


class ParitySimulation(SimulatedGpus):
    """Answers for the parity readings (part of `SimulatedNvml`)."""

    def set_reading(self, gpu: int, name: str, value: int) -> None:
        """Overrides one reading of GPU `gpu`: an NVML field name (`NVML_FI_DEV_*`) or one of
        `clock_event_reasons` (the bitmask), `nvlink_down` (a link number), `pcie_width`,
        `pcie_generation` (the current one; the max stays 16 lanes / gen 5), `vgpu_licensed`."""
        self._overrides()[(gpu, name)] = value

    def _overrides(self) -> dict[tuple[int, str], int]:
        # Created on first use: SimulatedNvml's __init__ stays as it is.
        found: dict[tuple[int, str], int] = self.__dict__.setdefault("_parity_overrides", {})
        return found

    def _reading(self, gpu: int, name: str) -> int | None:
        return self._overrides().get((gpu, name))

    def parity_fields(self, index: int, t: float, load: float) -> dict[str, float]:
        """The parity fields' raw NVML values (ns, counts, 0/1), overrides applied last."""
        values: dict[str, float] = {
            "NVML_FI_DEV_ECC_SBE_AGG_TOTAL": 3 * index + t // 50,
            "NVML_FI_DEV_ECC_DBE_AGG_TOTAL": 0,
            "NVML_FI_DEV_RETIRED_SBE": index,
            "NVML_FI_DEV_RETIRED_DBE": 0,
            "NVML_FI_DEV_RETIRED_PENDING": 0,
            "NVML_FI_DEV_REMAPPED_PENDING": 0,
            "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": t // 600,
            "NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": 0,
            "NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": t // 300,
            "NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 0,
            "NVML_FI_DEV_PERF_POLICY_POWER": t * 5e7 * (index + 1),  # ns: 5 % of the time
            "NVML_FI_DEV_PERF_POLICY_THERMAL": 0,
            "NVML_FI_DEV_PERF_POLICY_SYNC_BOOST": 0,
            "NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT": 0,
            "NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION": t * 2e8,  # 20 % of the time
            "NVML_FI_DEV_PERF_POLICY_RELIABILITY": 0,
        }
        for (gpu, name), value in self._overrides().items():
            if gpu == index and name.startswith("NVML_FI_"):
                values[name] = value
        return values

    def clock_event_reasons(self, handle: SimHandle) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons")
        forced = self._reading(gpu.index, "clock_event_reasons")
        if forced is not None:
            return forced
        load = self._load(gpu.index)
        return _IDLE if load < 0.1 else _POWER_CAP if load > 0.9 else 0

    def _link(self, handle: SimHandle, call: str, link: int) -> SimGpu:
        gpu = self._gpu(handle, call)
        if not 0 <= link < nvlink_count(gpu.spec.model):
            raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "Not Supported")
        return gpu

    def nvlink_state(self, handle: SimHandle, link: int) -> bool:
        gpu = self._link(handle, "nvmlDeviceGetNvLinkState", link)
        return self._reading(gpu.index, "nvlink_down") != link

    def nvlink_error_counter(self, handle: SimHandle, link: int, counter: int) -> int:
        gpu = self._link(handle, "nvmlDeviceGetNvLinkErrorCounter", link)
        t = self._elapsed()
        return int(t // 300) if counter == 0 and link == gpu.index % 18 else 0  # replays

    def pcie_link(self, handle: SimHandle) -> tuple[int, int, int, int]:
        gpu = self._gpu(handle, "nvmlDeviceGetCurrPcieLinkGeneration")
        self._gpu(handle, "nvmlDeviceGetCurrPcieLinkWidth")
        gen = self._reading(gpu.index, "pcie_generation")
        width = self._reading(gpu.index, "pcie_width")
        return (5 if gen is None else gen), 5, (16 if width is None else width), 16

    def vgpu_licensed(self, handle: SimHandle) -> bool:
        gpu = self._gpu(handle, "nvmlDeviceGetGridLicensableFeatures")
        licensed = self._reading(gpu.index, "vgpu_licensed")
        if licensed is None:  # bare metal
            raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "Not Supported")
        return bool(licensed)
