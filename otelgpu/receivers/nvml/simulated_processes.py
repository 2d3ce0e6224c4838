"""The simulated backend's GPU processes (part of `SimulatedNvml`): the compute process list
and per-process utilization samples.

A GPU's configured processes run in its first MIG instance when it has any, as NVML lists
them: the GPU handle answers for every instance. Processes asking together for more memory than
the device they run in holds are reported scaled down to fit; each one's utilization is the
GPU's load split by the memory it holds, so the shares add up to the GPU's own.
"""

from __future__ import annotations

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.nvml import NvmlError, ProcessUtilization
from otelgpu.receivers.nvml.simulated_gpus import (
    SimGpu,
    SimHandle,
    SimulatedGpus,
    profile_memory,
    reserved_memory,
)


class ProcessSimulation(SimulatedGpus):
    """`compute_processes` and `process_utilization`, and the test hook `set_processes`."""

    def set_processes(self, gpu: int, processes: list[tuple[int, int]]) -> None:
        """Replaces GPU `gpu`'s process list ((pid, used bytes) pairs)."""
        self._gpus[gpu].processes = list(processes)

    def compute_processes(self, handle: SimHandle) -> list[tuple[int, int]]:
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        # As NVML: the GPU handle answers for every instance; a GPU's configured processes
        # run in its first MIG instance when it has any.
        if handle.mig < 0 or handle.mig == 0:
            return self._processes(gpu)
        return []

    def _processes(self, gpu: SimGpu) -> list[tuple[int, int]]:
        """The GPU's processes as NVML reports them: when together they ask for more memory
        than the device they run in can hold (its first MIG instance, if it has any; less what
        is reserved), each one's memory is scaled down in proportion, so they fit."""
        capacity = gpu.spec.memory - reserved_memory(gpu.spec.memory)
        if gpu.spec.mig:
            instance = profile_memory(gpu.spec.mig[0].profile)
            capacity = min(capacity, instance - reserved_memory(instance))
        asked = sum(memory for _, memory in gpu.processes)
        if asked <= capacity:
            return list(gpu.processes)
        return [(pid, memory * capacity // asked) for pid, memory in gpu.processes]

    def process_utilization(self, handle: SimHandle, since_us: int) -> list[ProcessUtilization]:
        gpu = self._gpu(handle, "nvmlDeviceGetProcessUtilization")
        if handle.mig >= 0:  # as on real MIG instances
            raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "Not Supported")
        now_us = int(self._clock() * 1e6)
        if now_us <= since_us or not gpu.processes:
            return []
        # The GPU's load, split between its processes by the memory each one holds, so the
        # processes' shares add up to (at most) the GPU's own utilization.
        load = self._load(gpu.index)
        total = sum(used for _, used in gpu.processes) or len(gpu.processes)
        out = []
        for pid, used in gpu.processes:
            weight = (used or 1) / total if total else 0.0
            out.append(
                ProcessUtilization(
                    pid=pid,
                    timestamp_us=now_us,
                    sm=int(100 * load * weight),
                    memory=int(60 * load * weight),
                    encoder=int(10 * load * weight),
                    decoder=int(20 * load * weight),
                )
            )
        return out
