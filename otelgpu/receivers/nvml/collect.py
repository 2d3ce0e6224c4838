"""One collection cycle: read every device through the plan, build one ResourceMetrics each.

Runs in the receiver's worker thread (every NVML call blocks). Faults stay per device and
per source: a lost GPU is marked down and skipped while the others report; a source NVML
refuses (NOT_SUPPORTED) is remembered for that device and never asked again; any other
failure is counted in self-telemetry and the cycle goes on. GPM's readings (`gpm`) and the
processes on each GPU (`processes`) have readers of their own; what they share with this
one (the cycle, the guard around each NVML call, points) is in `reading`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from otelgpu import __version__
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import Attributes, AttrValue, Batch, ResourceMetrics
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.cgroup import ContainerResolver
from otelgpu.receivers.nvml.dcgm_fields import ON_MIG_FROM_GPU
from otelgpu.receivers.nvml.devices import Device
from otelgpu.receivers.nvml.gpm import GpmReader
from otelgpu.receivers.nvml.health import HealthSummary, status_points, summary_attributes
from otelgpu.receivers.nvml.metrics import XID_CODE
from otelgpu.receivers.nvml.nvml import NvmlClient
from otelgpu.receivers.nvml.processes import ProcessReader, gone_markers
from otelgpu.receivers.nvml.reading import (
    Cycle,
    Failed,
    GpuLost,
    Guard,
    Points,
    add_point,
    metrics_of,
)
from otelgpu.receivers.nvml.sources import FIELD_IDS, FieldRead, Plan

_FIELD_NAMES = {field_id: name for name, field_id in FIELD_IDS.items()}
_UP = "nvidia.gpu.up"
_STATUS = "hw.status"
_XID = "nvidia.gpu.xid.errors"
# Refused readings named in the INFO line per GPU model; a MIG instance refuses dozens.
_LISTED = 4


def _notes(device: Device, listed: tuple[tuple[int, str], ...] | None) -> dict[str, object] | None:
    """The notes on a device's resource: the processes NVML lists on it (`listed`, read
    without per-process series), whether `naming: dcgm` leaves the device out, and, on a MIG
    instance that stands for its GPU there, which of the GPU's readings it carries."""
    out: dict[str, object] = {} if listed is None else {notes.GPU_PROCESSES: listed}
    if device.dcgm_left_out:
        out[notes.DCGM_LEFT_OUT] = True
    parent = device.parent
    if parent is not None and parent.dcgm_left_out and not device.dcgm_left_out:
        out[notes.DCGM_FROM_GPU] = (parent.uuid, ON_MIG_FROM_GPU)
    return out or None


class Collector:
    """Reads devices through a `Plan` and turns the readings into a batch.

    `emitted`: the metrics to emit, when the plan reads more (the inputs of the health
    summary's rules whose own metrics are off: read for the summary, then dropped).
    `only`: per metric, the attribute and the values of the points to keep (a counters CSV
    listing some of the dcgm fields one metric is); its other points are dropped."""

    def __init__(
        self,
        *,
        client: NvmlClient,
        plan: Plan,
        emitted: frozenset[str] | None = None,
        only: Mapping[str, tuple[str, frozenset[AttrValue]]] | None = None,
        resolver: ContainerResolver | None,
        telemetry: SelfTelemetry,
        receiver: str,
        logger: logging.Logger,
    ) -> None:
        self._client = client
        self._plan = plan
        self._log = logger
        self._guard = Guard(telemetry, receiver)
        self._gpm = GpmReader(client, plan, self._guard)
        self._processes = (
            None if resolver is None else ProcessReader(client, plan, resolver, self._guard)
        )
        # field id → the reads it feeds; (metric, attributes) → how many fields add up into
        # that point (more than one: a total, emitted only when every part answered that cycle)
        self._reads: dict[int, tuple[FieldRead, ...]] = {}
        self._parts: dict[tuple[str, int], int] = {}
        for read in plan.fields:
            self._reads[read.field_id] = (*self._reads.get(read.field_id, ()), read)
            key = (read.metric, id(read.attributes))
            self._parts[key] = self._parts.get(key, 0) + 1
        self._field_ids = list(self._reads)
        self._xid_attributes: dict[int, Attributes] = {}
        self._summary = HealthSummary()
        self._hidden = () if emitted is None else tuple(plan.enabled - emitted)
        self._only = dict(only or {})

    def collect(self, devices: list[Device], cycle: Cycle) -> Batch:
        """One ResourceMetrics per device (plus one per GPU process); never raises."""
        out: list[ResourceMetrics] = []
        live_pids: list[int] = []
        refused: list[Device] = []  # devices NVML refused something new this cycle
        reader = self._processes
        for device in devices:
            points: Points = {}
            processes: list[ResourceMetrics] = []
            listed: tuple[tuple[int, str], ...] | None = None
            was_up = device.up
            if device.parent is not None and not device.parent.up:
                device.up = False  # a MIG instance goes down with its GPU
            if device.up:
                known = len(device.unsupported)
                try:
                    self._read(device, cycle, points)
                    if reader is not None and reader.enabled:
                        processes = reader.read(device, cycle, live_pids)
                    elif reader is not None:
                        listed = reader.listed(device, live_pids)
                except GpuLost:
                    self._lost(device)
                    points.clear()
                except Exception:  # a bug must cost one device one cycle, not the batch
                    self._guard.error("collect")
                if len(device.unsupported) != known:
                    refused.append(device)
            if not device.up:
                self._xids(device, cycle, points)
            self._health(device, cycle, points)
            for name in self._hidden:
                points.pop(name, None)
            for name, (key, values) in self._only.items():
                if name in points:
                    points[name] = [p for p in points[name] if p.attributes.get(key) in values]
                    if not points[name]:
                        del points[name]
            if points:
                out.append(
                    ResourceMetrics(
                        resource=device.resource,
                        metrics=metrics_of(points),
                        identity=device.uuid,
                        scope_version=__version__,
                        schema_url=semconv.SCHEMA_URL,
                        notes=_notes(device, listed),
                    )
                )
            if device.dcgm_left_out:  # a device naming: dcgm leaves out, its processes too
                left_out = {notes.DCGM_LEFT_OUT: True}
                processes = [replace(p, notes={**(p.notes or {}), **left_out}) for p in processes]
            out.extend(processes)
            if was_up and not device.up:  # its readings and processes stop here: say so once
                out.extend(gone_markers(device))
        if reader is not None:
            reader.retain(live_pids)
        if refused:
            self._tell_unsupported(refused)
        return tuple(out)

    def _tell_unsupported(self, devices: list[Device]) -> None:
        """Logs what NVML newly refused for good, by NVML name: each device at DEBUG, and one
        INFO line per GPU model and kind of device, so that a node of MIG instances (each of
        which refuses dozens of fields) starts with a screenful, not a wall."""
        groups: dict[tuple[str, bool, tuple[str, ...]], int] = {}
        for device in devices:
            new = tuple(sorted(
                _source_name(key) for key in device.unsupported - device.told_unsupported
                if key != "fields"  # bookkeeping: every batched field is refused
            ))  # fmt: skip
            device.told_unsupported |= device.unsupported
            if not new:
                continue
            kind = "MIG instance" if device.is_mig else "GPU"
            self._log.debug(
                "%s %s (index %d): not supported, not asked again: %s",
                kind,
                device.uuid,
                device.index,
                ", ".join(new),
            )
            key = (str(device.resource.get(semconv.HW_MODEL, "GPU")), device.is_mig, new)
            groups[key] = groups.get(key, 0) + 1
        for (model, is_mig, names), count in groups.items():
            self._log.info(
                "%s (%s): %s not supported, not asked again: %s",
                model,
                _count(count, "MIG instance" if is_mig else "GPU"),
                _count(len(names), "NVML reading"),
                _names(names),
            )

    def _health(self, device: Device, cycle: Cycle, points: Points) -> None:
        """`nvidia.gpu.up` and `hw.status`, each with the health summary: emitted for a lost
        GPU too (that is the news)."""
        enabled = self._plan.enabled
        up, status = _UP in enabled, _STATUS in enabled
        if not (up or status):
            return
        xids = cycle.xids.get(device.uuid, {})
        if device.up and not device.is_mig:
            state, reason = self._summary.state(device.uuid, points, xids, cycle.now_ns)
        elif not device.is_mig:  # lost: its XIDs stay part of the story
            state, reason = self._summary.lost(device.uuid, xids, cycle.now_ns)
        else:  # a MIG instance is as healthy as it answers; its GPU carries the reasons
            state, reason = ("ok", "") if device.up else ("failed", "gpu_lost")
        if up:
            attributes = summary_attributes(state, reason)
            add_point(points, _UP, attributes, cycle, 1 if device.up else 0, device)
        if status:
            for attributes, value in status_points(state, reason):
                add_point(points, _STATUS, attributes, cycle, value, device)

    # --- reading ------------------------------------------------------------------------------

    def _read(self, device: Device, cycle: Cycle, points: Points) -> None:
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
                    add_point(points, metric, attrs, cycle, value, device)
        for extra in () if device.is_mig else self._plan.points:  # whole-GPU readings
            if extra.key in device.unsupported:
                continue
            found = device.static.get(extra.key)  # only static readers' answers are kept
            if found is None:
                read = self._guard(device, extra.key, extra.read, self._client, device)
                if isinstance(read, Failed):
                    continue
                found = read
                if extra.static:
                    device.static[extra.key] = found  # a fact of the board: kept while open
            for metric, attrs, value in found:
                if metric in self._plan.enabled:
                    add_point(points, metric, attrs, cycle, value, device)
        if self._gpm.reads(device):
            self._gpm.read(device, cycle, points)
        self._xids(device, cycle, points)

    def _xids(self, device: Device, cycle: Cycle, points: Points) -> None:
        """The GPU's XID counts: read whether it answers or is lost (the XIDs before a loss
        are its evidence: 79 says it fell off the bus)."""
        if not device.is_mig and _XID in self._plan.enabled and device.uuid in cycle.xid_gpus:
            if device.up:  # watched: the metric, without points before any XID (a lost GPU
                points.setdefault(_XID, [])  # claims no "no error": only its XIDs stay)
            for code, count in cycle.xids.get(device.uuid, {}).items():  # latest XID last
                add_point(points, _XID, self._xid_attrs(code), cycle, count, device)

    def _fields(self, device: Device, cycle: Cycle, points: Points) -> None:
        ids = device.field_ids
        if ids is None:  # recomputed only after NVML refused a field
            ids = [i for i in self._field_ids if f"field:{i}" not in device.unsupported]
            device.field_ids = ids
        answer = self._guard(device, "fields", self._client.field_values, device.handle, ids)
        if isinstance(answer, Failed):
            return
        sums: dict[tuple[str, int], tuple[Attributes, int | float, int]] = {}
        for entry in answer:
            reads = self._reads.get(entry.field_id)
            if reads is None:
                continue
            if entry.code == nvml.SUCCESS:
                for read in reads:
                    value = entry.value if read.scale == 1.0 else entry.value * read.scale
                    key = (read.metric, id(read.attributes))
                    held = sums.get(key)
                    sums[key] = (
                        (read.attributes, value, 1)
                        if held is None
                        else (read.attributes, held[1] + value, held[2] + 1)
                    )
            elif entry.code == nvml.ERROR_GPU_IS_LOST:
                raise GpuLost
            elif entry.code in nvml.UNSUPPORTED_CODES:
                device.unsupported.add(f"field:{entry.field_id}")
                device.field_ids = None
            else:
                self._guard.error(reads[0].name)
        parts = self._parts
        for key, (attributes, value, answered) in sums.items():
            if answered == parts[key]:  # never part of a total
                add_point(points, key[0], attributes, cycle, value, device)
        if len(ids) and all(f"field:{i}" in device.unsupported for i in ids):
            device.unsupported.add("fields")  # nothing left to ask this device in a batch

    def _needs_fallback(self, device: Device, key: str) -> bool:
        """Whether `device` lacks `key`'s reading, so that its fallback call must give it."""
        if key.startswith("gpm:"):  # read from GPM by whole GPUs that have it
            gpm_reads = device.gpm and not device.is_mig and "gpm" not in device.unsupported
            return not gpm_reads or key in device.unsupported
        return key in device.unsupported

    def prime(self, devices: list[Device]) -> bool:
        """GPM's first sample on the devices that read GPM (`GpmReader.prime`)."""
        return self._gpm.prime(devices)

    # --- helpers ------------------------------------------------------------------------------

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


def _source_name(key: str) -> str:
    """An unsupported-source key as NVML names it (`field:82` → `NVML_FI_DEV_MEMORY_TEMP`)."""
    how, _, what = key.partition(":")
    if how == "field":
        return _FIELD_NAMES.get(int(what), key) if what.isdigit() else key
    return what if how == "gpm" else key


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _names(names: tuple[str, ...]) -> str:
    """The first `_LISTED` names, and how many more (the DEBUG lines give them all)."""
    if len(names) <= _LISTED:
        return ", ".join(names)
    more = len(names) - _LISTED
    return f"{', '.join(names[:_LISTED])} and {more} more (each device's list at DEBUG)"
