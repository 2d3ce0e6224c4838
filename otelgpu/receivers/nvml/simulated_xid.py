"""The simulated backend's XID events (part of `SimulatedNvml`): the event set, the XIDs its
config schedules (`xid_errors`, each due `after` its time since init) and those a test injects
(`inject_xid`), delivered by `event_wait` as NVML's `nvmlEventSetWait` delivers them."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import SimulatedConfig
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.simulated_gpus import SimHandle, SimulatedGpus


class XidSimulation(SimulatedGpus):
    """The event calls of `NvmlClient`, and the test hook `inject_xid`."""

    def __init__(self, config: SimulatedConfig, clock: Callable[[], float]) -> None:
        super().__init__(config, clock)
        self._events: deque[tuple[float, int, int]] = deque()  # (due, gpu index, code)
        self._wake = threading.Condition()

    def schedule_xids(self) -> None:
        """Queues the XIDs the config gives each GPU (after `open_gpus`)."""
        self._events = deque(
            sorted(
                (self._t0 + x.after, gpu.index, x.code)
                for gpu in self._gpus
                for x in gpu.spec.xid_errors
            )
        )

    def inject_xid(self, gpu: int, code: int) -> None:
        """Queues an XID error on GPU `gpu`, delivered by the next `event_wait`."""
        with self._wake:
            self._events.appendleft((self._clock(), gpu, code))
            self._wake.notify_all()

    def event_set_create(self) -> Any:
        self.calls["nvmlEventSetCreate"] += 1
        return set()

    def register_xid_events(self, handle: SimHandle, event_set: Any) -> None:
        self._gpu(handle, "nvmlEventTypeXidCriticalError")
        event_set.add(handle.gpu)

    def event_wait(self, event_set: Any, timeout_ms: int) -> tuple[SimHandle, int]:
        self.calls["nvmlEventSetWait"] += 1
        with self._wake:
            event = self._due_event(event_set)
            if event is None:
                # Real time, capped short: a simulated GPU has no reason to make the
                # receiver's shutdown wait for a full NVML timeout.
                self._wake.wait(min(timeout_ms / 1000, 0.05))
                event = self._due_event(event_set)
        if event is None:
            raise NvmlError(nvml.ERROR_TIMEOUT, "Timeout")
        return SimHandle(event[0]), event[1]

    def _due_event(self, event_set: Any) -> tuple[int, int] | None:
        now = self._clock()
        for item in list(self._events):
            due, gpu, code = item
            if due <= now and gpu in event_set:
                self._events.remove(item)
                return gpu, code
        return None

    def event_set_free(self, event_set: Any) -> None:
        self.calls["nvmlEventSetFree"] += 1
