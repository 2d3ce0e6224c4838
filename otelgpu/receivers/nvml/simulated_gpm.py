"""The simulated backend's GPM (part of `SimulatedNvml`): sample buffers, GPU and MIG samples,
and the metrics between two samples, each a fixed share of the GPU's load."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.simulated_gpus import SimHandle, SimulatedGpus
from otelgpu.receivers.nvml.simulated_parity import PARITY_GPM_WEIGHTS
from otelgpu.receivers.nvml.sources import GPM_METRIC_IDS

_GPM_NAMES = {v: k for k, v in GPM_METRIC_IDS.items()}
# % at full load per metric id (SM, graphics, DRAM, tensor); the parity metrics' beside them.
_WEIGHTS = {1: 1.0, 2: 0.9, 5: 0.6, 10: 0.5, **PARITY_GPM_WEIGHTS}


class GpmSimulation(SimulatedGpus):
    """The `gpm_*` calls of `NvmlClient`."""

    def gpm_supported(self, handle: SimHandle) -> bool:
        gpu = self._gpu(handle, "nvmlGpmQueryDeviceSupport")
        return gpu.spec.gpm

    def gpm_sample_alloc(self) -> Any:
        self.calls["nvmlGpmSampleAlloc"] += 1
        return {"gpu": -1, "mig": -1, "t": 0.0}

    def gpm_sample_free(self, sample: Any) -> None:
        self.calls["nvmlGpmSampleFree"] += 1

    def gpm_sample(self, handle: SimHandle, sample: Any) -> None:
        gpu = self._gpu(handle, "nvmlGpmSampleGet")
        sample["gpu"], sample["mig"], sample["t"] = gpu.index, -1, self._elapsed()

    def gpm_mig_sample(self, handle: SimHandle, gpu_instance_id: int, sample: Any) -> None:
        gpu = self._gpu(handle, "nvmlGpmMigSampleGet")
        if not 1 <= gpu_instance_id <= len(gpu.spec.mig):
            raise NvmlError(nvml.ERROR_NOT_FOUND, "Not Found")
        sample["gpu"], sample["mig"], sample["t"] = gpu.index, gpu_instance_id, self._elapsed()

    def gpm_metrics(
        self, first: Any, second: Any, metric_ids: Sequence[int]
    ) -> list[tuple[int, float]]:
        self.calls["nvmlGpmMetricsGet"] += 1
        # As real NVML: both samples must have been taken, of one device (seen on an H100:
        # a never-filled first sample is NVML_ERROR_INVALID_ARGUMENT).
        if -1 in (first["gpu"], second["gpu"]) or first["gpu"] != second["gpu"]:
            raise NvmlError(nvml.ERROR_INVALID_ARGUMENT, "Invalid Argument")
        gpu = self._gpus[second["gpu"]]
        # A MIG instance runs its own share of the load: shifted so series differ.
        load = self._load(gpu.index + 0.1 * max(0, second["mig"]))
        return [
            (nvml.ERROR_NOT_SUPPORTED, 0.0)
            if _GPM_NAMES.get(m, "") in gpu.unsupported
            else (nvml.SUCCESS, 100 * load * _WEIGHTS.get(m, 0.5))
            for m in metric_ids
        ]
