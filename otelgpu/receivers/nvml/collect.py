"""One collection cycle: read every device through the plan, build one ResourceMetrics each.

Runs in the receiver's worker thread (every NVML call blocks). Faults stay per device and
per source: a lost GPU is marked down and skipped while the others report; a source NVML
refuses (NOT_SUPPORTED) is remembered for that device and never asked again; any other
failure is counted in self-telemetry and the cycle goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from otelgpu import __version__, semconv
from otelgpu.model import Attributes, Batch, Metric, NumberDataPoint, ResourceMetrics
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.cgroup import ContainerResolver
from otelgpu.receivers.nvml.devices import Device
from otelgpu.receivers.nvml.fields_parity import gpm_convert
from otelgpu.receivers.nvml.health import HealthSummary, status_points
from otelgpu.receivers.nvml.metrics import BY_NAME, CATALOG, GPU_TASK, XID_CODE
from otelgpu.receivers.nvml.nvml import NvmlClient, NvmlError, ProcessUtilization
from otelgpu.receivers.nvml.sources import FIELD_IDS, NO_ATTRIBUTES, WHOLE_GPU_GPM, Plan
from otelgpu.telemetry import SelfTelemetry

_NAMES = tuple(spec.name for spec in CATALOG)  # the order metrics appear in a resource
_MONOTONIC = frozenset(spec.name for spec in CATALOG if spec.monotonic)
_FIELD_NAMES = {field_id: name for name, field_id in FIELD_IDS.items()}
_UP = "nvidia.gpu.up"
_STATUS = "hw.status"
_XID = "nvidia.gpu.xid.errors"
_PROCESS_MEMORY = "nvidia.gpu.process.memory.usage"
_PROCESS_UTILIZATION = "nvidia.gpu.process.utilization"
_PROCESS_MEMORY_BUSY = "nvidia.gpu.process.memory.busy"
PROCESS_METRICS = frozenset({_PROCESS_MEMORY, _PROCESS_UTILIZATION, _PROCESS_MEMORY_BUSY})
_COMPUTE_PROCESSES = "nvmlDeviceGetComputeRunningProcesses"
_PROCESS_SAMPLES = "nvmlDeviceGetProcessUtilization"
_TASKS: tuple[tuple[str, Attributes], ...] = tuple(
    (task, {GPU_TASK: task}) for task in ("general", "encoder", "decoder")
)


P = ParamSpec("P")
T = TypeVar("T")


class GpuLost(Exception):
    """The device answered NVML_ERROR_GPU_IS_LOST."""


class Failed:
    """The result of a read that failed (None is a valid answer of some NVML calls)."""


FAILED = Failed()


@dataclass(frozen=True, slots=True)
class Cycle:
    """What one cycle shares across devices: its timestamp and the counters' start time."""

    now_ns: int
    start_ns: int
    xids: Mapping[str, Mapping[int, int]]  # GPU UUID → XID code → count


class Collector:
    """Reads devices through a `Plan` and turns the readings into a batch."""

    def __init__(
        self,
        *,
        client: NvmlClient,
        plan: Plan,
        resolver: ContainerResolver | None,
        telemetry: SelfTelemetry,
        receiver: str,
        logger: logging.Logger,
    ) -> None:
        self._client = client
        self._plan = plan
        self._resolver = resolver
        self._telemetry = telemetry
        self._receiver = receiver
        self._log = logger
        self._field_ids = [r.field_id for r in plan.fields]
        self._reads = {r.field_id: r for r in plan.fields}
        self._xid_attributes: dict[int, Attributes] = {}
        self._summary = HealthSummary()

    def collect(self, devices: list[Device], cycle: Cycle) -> Batch:
        """One ResourceMetrics per device (plus one per GPU process); never raises."""
        out: list[ResourceMetrics] = []
        live_pids: list[int] = []
        for device in devices:
            points: dict[str, list[NumberDataPoint]] = {}
            processes: list[ResourceMetrics] = []
            if device.parent is not None and not device.parent.up:
                device.up = False  # a MIG instance goes down with its GPU
            if device.up:
                known = len(device.unsupported)
                try:
                    self._read(device, cycle, points)
                    if self._resolver is not None and PROCESS_METRICS & self._plan.enabled:
                        processes = self._processes(device, cycle, live_pids)
                except GpuLost:
                    self._lost(device)
                    points.clear()
                except Exception:  # a bug must cost one device one cycle, not the batch
                    self._error("collect")
                if len(device.unsupported) != known:
                    self._tell_unsupported(device)
            self._health(device, cycle, points)
            if points:
                out.append(
                    ResourceMetrics(
                        resource=device.resource,
                        metrics=_metrics(points),
                        identity=device.uuid,
                        scope_version=__version__,
                        schema_url=semconv.SCHEMA_URL,
                    )
                )
            out.extend(processes)
        if self._resolver is not None:
            self._resolver.retain(live_pids)
        return tuple(out)

    def _tell_unsupported(self, device: Device) -> None:
        """Logs, once per device, the NVML sources it refused for good (by their NVML names)."""
        new = sorted(
            _source_name(key) for key in device.unsupported - device.told_unsupported
            if key != "fields"  # bookkeeping: every batched field is refused
        )  # fmt: skip
        device.told_unsupported |= device.unsupported
        if new:
            self._log.info(
                "%s %s (index %d): not supported, not asked again: %s",
                "MIG instance" if device.is_mig else "GPU",
                device.uuid,
                device.index,
                ", ".join(new),
            )

    def _health(
        self, device: Device, cycle: Cycle, points: dict[str, list[NumberDataPoint]]
    ) -> None:
        """`nvidia.gpu.up` and `hw.status`: emitted for a lost GPU too (that is the news)."""
        enabled = self._plan.enabled
        if _UP in enabled:
            self._add(points, _UP, NO_ATTRIBUTES, cycle, 1 if device.up else 0, device)
        if _STATUS in enabled:
            if device.up and not device.is_mig:
                xids = cycle.xids.get(device.uuid, {})
                states = self._summary.points(device.uuid, points, xids, cycle.now_ns)
            else:  # a MIG instance is as healthy as it answers; its GPU carries the reasons
                states = status_points(
                    "ok" if device.up else "failed", "" if device.up else "gpu_lost"
                )
            for attributes, value in states:
                self._add(points, _STATUS, attributes, cycle, value, device)

    # --- reading ------------------------------------------------------------------------------

    def _read(self, device: Device, cycle: Cycle, points: dict[str, list[NumberDataPoint]]) -> None:
        if self._field_ids and "fields" not in device.unsupported:
            self._fields(device, cycle, points)
        unsupported = device.unsupported
        for reader in self._plan.calls:
            if reader.key in unsupported or (
                reader.fallback_for and not self._needs_fallback(device, reader.fallback_for)
            ):
                continue
            values = self._guard(device, reader.key, reader.read, self._client, device.handle)
            if isinstance(values, Failed):
                continue
            attributes = reader.point_attributes()
            for metric, value, attrs in zip(reader.metrics, values, attributes, strict=True):
                if metric in self._plan.enabled:
                    self._add(points, metric, attrs, cycle, value, device)
        for extra in () if device.is_mig else self._plan.points:  # whole-GPU readings
            if extra.key not in device.unsupported:
                found = self._guard(device, extra.key, extra.read, self._client, device)
                for metric, attrs, value in () if isinstance(found, Failed) else found:
                    if metric in self._plan.enabled:
                        self._add(points, metric, attrs, cycle, value, device)
        if self._reads_gpm(device):
            self._gpm(device, cycle, points)
        if not device.is_mig and _XID in self._plan.enabled:
            for code, count in cycle.xids.get(device.uuid, {}).items():
                self._add(points, _XID, self._xid_attrs(code), cycle, count, device)

    def _guard(
        self, device: Device, key: str, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T | Failed:
        """Runs one NVML read; FAILED when it failed (remembered if NVML refused it for good)."""
        try:
            return call(*args, **kwargs)
        except NvmlError as exc:
            if exc.code == nvml.ERROR_GPU_IS_LOST:
                raise GpuLost from None
            if exc.code in nvml.UNSUPPORTED_CODES:
                device.unsupported.add(key)
            else:
                self._error(key)
        except Exception:  # a bug or a surprising answer: counted, the cycle goes on
            self._error(key)
        return FAILED

    def _fields(
        self, device: Device, cycle: Cycle, points: dict[str, list[NumberDataPoint]]
    ) -> None:
        ids = device.field_ids
        if ids is None:  # recomputed only after NVML refused a field
            ids = [i for i in self._field_ids if f"field:{i}" not in device.unsupported]
            device.field_ids = ids
        answer = self._guard(device, "fields", self._client.field_values, device.handle, ids)
        if isinstance(answer, Failed):
            return
        sums: dict[tuple[str, int], tuple[Attributes, int | float]] = {}
        for entry in answer:
            read = self._reads.get(entry.field_id)
            if read is None:
                continue
            if entry.code == nvml.SUCCESS:
                value = entry.value if read.scale == 1.0 else entry.value * read.scale
                key = (read.metric, id(read.attributes))
                held = sums.get(key)
                sums[key] = (read.attributes, value if held is None else held[1] + value)
            elif entry.code == nvml.ERROR_GPU_IS_LOST:
                raise GpuLost
            elif entry.code in nvml.UNSUPPORTED_CODES:
                device.unsupported.add(f"field:{entry.field_id}")
                device.field_ids = None
            else:
                self._error(read.name)
        for (metric, _), (attributes, value) in sums.items():
            self._add(points, metric, attributes, cycle, value, device)
        if len(ids) and all(f"field:{i}" in device.unsupported for i in ids):
            device.unsupported.add("fields")  # nothing left to ask this device in a batch

    def _needs_fallback(self, device: Device, key: str) -> bool:
        """Whether `device` lacks `key`'s reading, so that its fallback call must give it."""
        if key.startswith("gpm:"):  # read from GPM by whole GPUs that have it
            gpm_reads = device.gpm and not device.is_mig and "gpm" not in device.unsupported
            return not gpm_reads or key in device.unsupported
        return key in device.unsupported

    def prime(self, devices: list[Device]) -> bool:
        """Takes GPM's first sample on every device that reads GPM and has none yet, so that
        the next collection has GPM's figures instead of only its first sample; True when one
        was taken (the caller then waits GPM_REFRESH before collecting)."""
        took = False
        for device in devices:
            if device.up and self._reads_gpm(device) and not device.gpm_primed:
                took = self._gpm_sample(device) is not None or took
        return took

    def _reads_gpm(self, device: Device) -> bool:
        return bool(self._plan.gpm) and device.gpm and "gpm" not in device.unsupported

    def _gpm_sample(self, device: Device) -> tuple[Any, Any] | None:
        """Reads a GPM sample into the device's current buffer (allocating both buffers the
        first time), then makes it the previous one: (the sample before, this one), or None
        when it could not."""
        client = self._client
        if not device.gpm_samples:
            first = self._guard(device, "gpm", client.gpm_sample_alloc)
            second = self._guard(device, "gpm", client.gpm_sample_alloc)
            if isinstance(first, Failed) or isinstance(second, Failed):
                for sample in (first, second):  # give back the one that was allocated
                    if not isinstance(sample, Failed):
                        self._guard(device, "gpm", client.gpm_sample_free, sample)
                return None  # retried next cycle unless NVML refused ("gpm" unsupported)
            device.gpm_samples = [first, second]
        previous, current = device.gpm_samples
        if device.parent is not None:
            sampled = self._guard(
                device,
                "gpm",
                client.gpm_mig_sample,
                device.parent.handle,
                device.gpu_instance_id,
                current,
            )
        else:
            sampled = self._guard(device, "gpm", client.gpm_sample, device.handle, current)
        if sampled is FAILED:
            device.gpm_primed = False
            return None
        device.gpm_samples = [current, previous]
        device.gpm_primed = True
        return previous, current

    def _gpm(self, device: Device, cycle: Cycle, points: dict[str, list[NumberDataPoint]]) -> None:
        primed = device.gpm_primed  # GPM needs two samples: an unprimed device only samples
        taken = self._gpm_sample(device)
        if primed and taken is not None:
            previous, current = taken
            wanted = [
                (metric_id, name, metric)
                for metric_id, name, metric in self._plan.gpm
                if f"gpm:{name}" not in device.unsupported
                and not (device.is_mig and metric in WHOLE_GPU_GPM)  # a MIG slice has no PCIe link
            ]
            ids = list(dict.fromkeys(metric_id for metric_id, _, _ in wanted))  # asked once
            answer = self._guard(device, "gpm", self._client.gpm_metrics, previous, current, ids)
            if not isinstance(answer, Failed):
                self._gpm_points(device, wanted, dict(zip(ids, answer, strict=True)), cycle, points)

    def _gpm_points(
        self,
        device: Device,
        wanted: list[tuple[int, str, str]],
        answer: dict[int, tuple[int, float]],
        cycle: Cycle,
        points: dict[str, list[NumberDataPoint]],
    ) -> None:
        for metric_id, name, metric in wanted:
            code, value = answer[metric_id]
            if code == nvml.SUCCESS:
                self._add(points, metric, NO_ATTRIBUTES, cycle, gpm_convert(name, value), device)
            elif code in nvml.UNSUPPORTED_CODES:
                device.unsupported.add(f"gpm:{name}")

    def _processes(
        self, device: Device, cycle: Cycle, live_pids: list[int]
    ) -> list[ResourceMetrics]:
        """One resource per process on the GPU: its memory and its utilization samples."""
        # A MIG-enabled GPU answers for all its instances: read the instances instead.
        if device.has_mig or self._resolver is None:
            return []
        memory = self._process_memory(device)
        samples = self._process_samples(device)
        if memory is None and samples is None:
            return []
        used = memory or {}
        sampled = samples or {}
        pids = sorted(used.keys() | sampled.keys())
        out = []
        for pid in pids:
            live_pids.append(pid)
            points: dict[str, list[NumberDataPoint]] = {}
            if pid in used:
                self._add(points, _PROCESS_MEMORY, NO_ATTRIBUTES, cycle, used[pid], device)
            if samples is not None:
                # A listed process with no new sample did no work since the last one.
                self._utilization(points, sampled.get(pid), cycle, device)
            out.append(
                ResourceMetrics(
                    resource=self._process_resource(device, pid),
                    metrics=_metrics(points),
                    identity=(device.uuid, pid),
                    scope_version=__version__,
                    schema_url=semconv.SCHEMA_URL,
                )
            )
        resources = device.process_resources
        if len(resources) > len(pids):  # some processes ended: forget their resources
            running = set(pids)
            for gone in [p for p in resources if p not in running]:
                del resources[gone]
        return out

    def _process_memory(self, device: Device) -> dict[int, int] | None:
        if _PROCESS_MEMORY not in self._plan.enabled or _COMPUTE_PROCESSES in device.unsupported:
            return None
        procs = self._guard(
            device, _COMPUTE_PROCESSES, self._client.compute_processes, device.handle
        )
        return None if isinstance(procs, Failed) else dict(procs)

    def _process_samples(self, device: Device) -> dict[int, ProcessUtilization] | None:
        enabled = self._plan.enabled
        if _PROCESS_SAMPLES in device.unsupported or not (
            _PROCESS_UTILIZATION in enabled or _PROCESS_MEMORY_BUSY in enabled
        ):
            return None
        since = device.utilization_since_us
        read = self._client.process_utilization
        samples = self._guard(device, _PROCESS_SAMPLES, read, device.handle, since)
        if isinstance(samples, Failed):
            return None
        if samples:
            device.utilization_since_us = max(s.timestamp_us for s in samples)
        return {s.pid: s for s in samples}

    def _utilization(
        self,
        points: dict[str, list[NumberDataPoint]],
        sample: ProcessUtilization | None,
        cycle: Cycle,
        device: Device,
    ) -> None:
        enabled = self._plan.enabled
        if _PROCESS_UTILIZATION in enabled:
            values = (sample.sm, sample.encoder, sample.decoder) if sample else (0, 0, 0)
            for (_, attributes), value in zip(_TASKS, values, strict=True):
                self._add(points, _PROCESS_UTILIZATION, attributes, cycle, value / 100, device)
        if _PROCESS_MEMORY_BUSY in enabled:
            busy = sample.memory / 100 if sample else 0.0
            self._add(points, _PROCESS_MEMORY_BUSY, NO_ATTRIBUTES, cycle, busy, device)

    def _process_resource(self, device: Device, pid: int) -> Attributes:
        resource = device.process_resources.get(pid)
        if resource is None:
            assert self._resolver is not None
            resource = device.process_resources[pid] = {
                **device.resource,
                semconv.PROCESS_PID: pid,
                **self._resolver.attributes(pid),  # container.id, Slurm job/step
            }
        return resource

    # --- helpers ------------------------------------------------------------------------------

    def _add(
        self,
        points: dict[str, list[NumberDataPoint]],
        metric: str,
        attributes: Attributes,
        cycle: Cycle,
        value: int | float,
        device: Device,
    ) -> None:
        point = NumberDataPoint(
            # hw.id and hw.type on the point too (the conventions require them there): an
            # OTLP consumer that drops resource attributes still tells the GPUs apart.
            attributes=device.point_attributes(attributes),
            time_unix_nano=cycle.now_ns,
            value=value,
            start_time_unix_nano=cycle.start_ns if metric in _MONOTONIC else 0,
        )
        bucket = points.get(metric)
        if bucket is None:
            points[metric] = [point]
        else:
            bucket.append(point)

    def _xid_attrs(self, code: int) -> Attributes:
        attributes = self._xid_attributes.get(code)
        if attributes is None:
            attributes = self._xid_attributes[code] = {XID_CODE: code}
        return attributes

    def _lost(self, device: Device) -> None:
        if device.up:
            self._log.warning(
                "GPU %s (index %d) is lost; reporting it down", device.uuid, device.index
            )
        device.up = False
        if device.parent is not None:
            device.parent.up = False

    def _error(self, source: str) -> None:
        self._telemetry.count(
            "otelgpu_nvml_read_errors_total",
            1,
            "NVML reads that failed with an unexpected error",
            receiver=self._receiver,
            source=source,
        )


def _source_name(key: str) -> str:
    """An unsupported-source key as NVML names it (`field:82` → `NVML_FI_DEV_MEMORY_TEMP`)."""
    how, _, what = key.partition(":")
    if how == "field":
        return _FIELD_NAMES.get(int(what), key) if what.isdigit() else key
    return what if how == "gpm" else key


def _metric(name: str, points: list[NumberDataPoint]) -> Metric:
    spec = BY_NAME[name]
    return Metric(
        name=spec.name,
        unit=spec.unit,
        description=spec.description,
        kind=spec.kind,
        monotonic=spec.monotonic,
        points=tuple(points),
    )


def _metrics(points: dict[str, list[NumberDataPoint]]) -> tuple[Metric, ...]:
    if len(points) > 1:
        return tuple(_metric(name, points[name]) for name in _NAMES if name in points)
    return tuple(_metric(name, found) for name, found in points.items())
