"""The processes on a GPU, one resource each: the memory NVML lists for them and their
utilization samples since the last cycle, with the container (or Slurm job) that holds them
from their cgroup (`cgroup.ContainerResolver`). With no per-process metric on, only the list
of (pid, container id) is kept, as a note on the GPU's own resource (`notes.GPU_PROCESSES`):
what the squatter check needs, without a series per process."""

from __future__ import annotations

from otelgpu import __version__
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Attributes, ResourceMetrics
from otelgpu.receivers.nvml.cgroup import ContainerResolver
from otelgpu.receivers.nvml.devices import Device
from otelgpu.receivers.nvml.metrics import GPU_TASK
from otelgpu.receivers.nvml.nvml import NvmlClient, ProcessUtilization
from otelgpu.receivers.nvml.reading import Cycle, Failed, Guard, Points, add_point, metrics_of
from otelgpu.receivers.nvml.sources import NO_ATTRIBUTES, Plan

_MEMORY = "nvidia.gpu.process.memory.usage"
_UTILIZATION = "nvidia.gpu.process.utilization"
_MEMORY_BUSY = "nvidia.gpu.process.memory.busy"
PROCESS_METRICS = frozenset({_MEMORY, _UTILIZATION, _MEMORY_BUSY})
_COMPUTE_PROCESSES = "nvmlDeviceGetComputeRunningProcesses"
_SAMPLES = "nvmlDeviceGetProcessUtilization"
_TASKS: tuple[tuple[str, Attributes], ...] = tuple(
    (task, {GPU_TASK: task}) for task in ("general", "encoder", "decoder")
)


class ProcessReader:
    """Reads the processes on each GPU: their metrics when a process metric is enabled
    (`enabled`), else only who they are (`listed`)."""

    def __init__(
        self, client: NvmlClient, plan: Plan, resolver: ContainerResolver, guard: Guard
    ) -> None:
        self._client = client
        self._plan = plan
        self._resolver = resolver
        self._guard = guard
        self.enabled = bool(PROCESS_METRICS & plan.enabled)

    def read(self, device: Device, cycle: Cycle, live_pids: list[int]) -> list[ResourceMetrics]:
        """One resource per process on the GPU: its memory and its utilization samples (their
        PIDs added to `live_pids`)."""
        # A MIG-enabled GPU answers for all its instances: read the instances instead.
        if device.has_mig:
            return []
        memory = self._memory(device)
        samples = self._samples(device)
        if memory is None and samples is None:
            return []
        used = memory or {}
        sampled = samples or {}
        pids = sorted(used.keys() | sampled.keys())
        out = []
        for pid in pids:
            live_pids.append(pid)
            points: Points = {}
            if pid in used:
                add_point(points, _MEMORY, NO_ATTRIBUTES, cycle, used[pid], device)
            if samples is not None:
                # A listed process with no new sample did no work since the last one.
                self._utilization(points, sampled.get(pid), cycle, device)
            out.append(
                ResourceMetrics(
                    resource=self._resource(device, pid),
                    metrics=metrics_of(points),
                    identity=(device.uuid, pid),
                    scope_version=__version__,
                    schema_url=semconv.SCHEMA_URL,
                )
            )
        resources = device.process_resources
        if len(resources) > len(pids):  # some processes ended: forget them, and say so once
            running = set(pids)
            for gone in [p for p in resources if p not in running]:
                out.append(_gone(device, gone, resources.pop(gone)))
        return out

    def listed(self, device: Device, live_pids: list[int]) -> tuple[tuple[int, str], ...] | None:
        """(pid, container id or "") of each process NVML lists on the device, their PIDs
        added to `live_pids`; None when it cannot say (a MIG-enabled GPU answers for its
        instances, which are read instead; the call is unsupported or failed)."""
        procs = None if device.has_mig else self._compute(device)
        if procs is None:
            return None
        out = []
        for pid in sorted(procs):
            live_pids.append(pid)
            cid = self._resolver.attributes(pid).get(semconv.CONTAINER_ID, "")
            out.append((pid, str(cid)))
        return tuple(out)

    def retain(self, live_pids: list[int]) -> None:
        """Ends a cycle: the resolver forgets the processes no GPU listed."""
        self._resolver.retain(live_pids)

    def _memory(self, device: Device) -> dict[int, int] | None:
        return self._compute(device) if _MEMORY in self._plan.enabled else None

    def _compute(self, device: Device) -> dict[int, int] | None:
        """pid -> used GPU memory of the device's compute processes; None when NVML cannot
        say (unsupported there, or the call failed)."""
        if _COMPUTE_PROCESSES in device.unsupported:
            return None
        procs = self._guard(
            device, _COMPUTE_PROCESSES, self._client.compute_processes, device.handle
        )
        return None if isinstance(procs, Failed) else dict(procs)

    def _samples(self, device: Device) -> dict[int, ProcessUtilization] | None:
        enabled = self._plan.enabled
        if _SAMPLES in device.unsupported or not (
            _UTILIZATION in enabled or _MEMORY_BUSY in enabled
        ):
            return None
        since = device.utilization_since_us
        read = self._client.process_utilization
        samples = self._guard(device, _SAMPLES, read, device.handle, since)
        if isinstance(samples, Failed):
            return None
        if samples:
            device.utilization_since_us = max(s.timestamp_us for s in samples)
        return {s.pid: s for s in samples}

    def _utilization(
        self, points: Points, sample: ProcessUtilization | None, cycle: Cycle, device: Device
    ) -> None:
        enabled = self._plan.enabled
        if _UTILIZATION in enabled:
            values = (sample.sm, sample.encoder, sample.decoder) if sample else (0, 0, 0)
            for (_, attributes), value in zip(_TASKS, values, strict=True):
                add_point(points, _UTILIZATION, attributes, cycle, value / 100, device)
        if _MEMORY_BUSY in enabled:
            busy = sample.memory / 100 if sample else 0.0
            add_point(points, _MEMORY_BUSY, NO_ATTRIBUTES, cycle, busy, device)

    def _resource(self, device: Device, pid: int) -> Attributes:
        resource = device.process_resources.get(pid)
        if resource is None:
            resource = device.process_resources[pid] = {
                **device.resource,
                semconv.PROCESS_PID: pid,
                **self._resolver.attributes(pid),  # container.id, Slurm job/step
            }
        return resource


def gone_markers(device: Device) -> list[ResourceMetrics]:
    """What a device that stopped answering says once: its own identity and each of its
    processes' have no series now (`ResourceMetrics` with no metrics), up and status aside,
    which the same batch reports."""
    resources = device.process_resources
    markers = [_gone(device, pid, resource) for pid, resource in resources.items()]
    resources.clear()
    markers.append(
        ResourceMetrics(
            resource=device.resource,
            metrics=(),
            identity=device.uuid,
            scope_version=__version__,
            schema_url=semconv.SCHEMA_URL,
        )
    )
    return markers


def _gone(device: Device, pid: int, resource: Attributes) -> ResourceMetrics:
    return ResourceMetrics(
        resource=resource,
        metrics=(),
        identity=(device.uuid, pid),
        scope_version=__version__,
        schema_url=semconv.SCHEMA_URL,
    )
