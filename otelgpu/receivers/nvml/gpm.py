"""GPM (GPU performance monitoring) readings of a cycle: each figure comes from two samples
of a GPU's (or MIG instance's) counters, so every device keeps two sample buffers and the
cycle reads the metrics between the one before and the one it takes.

The first sample is taken when NVML opens (`prime`), GPM_REFRESH before the first collection,
so that the first collection has GPM's figures: NVML's documentation asks for samples over
100 ms apart, the counters refreshing that often.
"""

from __future__ import annotations

import math
from typing import Any

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.devices import Device
from otelgpu.receivers.nvml.fields_parity import gpm_convert
from otelgpu.receivers.nvml.nvml import NvmlClient
from otelgpu.receivers.nvml.reading import FAILED, Cycle, Failed, Guard, Points, add_point
from otelgpu.receivers.nvml.sources import NO_ATTRIBUTES, WHOLE_GPU_GPM, Plan


class GpmReader:
    """Samples GPM on the devices that have it and turns two samples into points."""

    def __init__(self, client: NvmlClient, plan: Plan, guard: Guard) -> None:
        self._client = client
        self._plan = plan
        self._guard = guard

    def reads(self, device: Device) -> bool:
        return bool(self._plan.gpm) and device.gpm and "gpm" not in device.unsupported

    def prime(self, devices: list[Device]) -> bool:
        """Takes GPM's first sample on every device that reads GPM and has none yet, so that
        the next collection has GPM's figures instead of only its first sample; True when one
        was taken (the caller then waits GPM_REFRESH before collecting)."""
        took = False
        for device in devices:
            if device.up and self.reads(device) and not device.gpm_primed:
                took = self._sample(device) is not None or took
        return took

    def read(self, device: Device, cycle: Cycle, points: Points) -> None:
        """Takes this cycle's sample; with the one before, adds GPM's figures to `points`."""
        primed = device.gpm_primed  # GPM needs two samples: an unprimed device only samples
        taken = self._sample(device)
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
                self._points(device, wanted, dict(zip(ids, answer, strict=True)), cycle, points)

    def _sample(self, device: Device) -> tuple[Any, Any] | None:
        """Reads a GPM sample into the device's current buffer (allocating both buffers the
        first time), then makes it the previous one: (the sample before, this one), or None
        when it could not."""
        client, guard = self._client, self._guard
        if not device.gpm_samples:
            first = guard(device, "gpm", client.gpm_sample_alloc)
            second = guard(device, "gpm", client.gpm_sample_alloc)
            if isinstance(first, Failed) or isinstance(second, Failed):
                for sample in (first, second):  # give back the one that was allocated
                    if not isinstance(sample, Failed):
                        guard(device, "gpm", client.gpm_sample_free, sample)
                return None  # retried next cycle unless NVML refused ("gpm" unsupported)
            device.gpm_samples = [first, second]
        previous, current = device.gpm_samples
        if device.parent is not None:
            sampled = guard(
                device,
                "gpm",
                client.gpm_mig_sample,
                device.parent.handle,
                device.gpu_instance_id,
                current,
            )
        else:
            sampled = guard(device, "gpm", client.gpm_sample, device.handle, current)
        if sampled is FAILED:
            device.gpm_primed = False
            return None
        device.gpm_samples = [current, previous]
        device.gpm_primed = True
        return previous, current

    def _points(
        self,
        device: Device,
        wanted: list[tuple[int, str, str]],
        answer: dict[int, tuple[int, float]],
        cycle: Cycle,
        points: Points,
    ) -> None:
        for metric_id, name, metric in wanted:
            code, value = answer[metric_id]
            if code == nvml.SUCCESS and math.isfinite(value):
                add_point(points, metric, NO_ATTRIBUTES, cycle, gpm_convert(name, value), device)
            elif code in nvml.UNSUPPORTED_CODES:
                device.unsupported.add(f"gpm:{name}")
            # SUCCESS with NaN: seen on an H200 for samples milliseconds apart (two collections
            # back to back); no figure this cycle, the next one has it
