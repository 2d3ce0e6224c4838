"""The simulated backend's XID events (part of `SimulatedNvml`): the event set, the XIDs its
config schedules (`xid_errors`, each due `after` its time since init) and those a test injects
(`inject_xid`), delivered by `event_wait` as NVML's `nvmlEventSetWait` delivers them.

A wait with no event due blocks as NVML's does, until an event comes or its timeout passes (real
time, as NVML's), never polling on a shorter period of its own: an idle XID thread costs what it
costs on a real GPU, so the CPU figures measured on the simulator are not inflated by it. An
injected XID wakes the wait at once; so does `end_event_wait` (the watcher is stopping), after
which every wait on that event set returns at once. A scheduled XID is seen by the first wait
after it is due: at once when it is due from the start, else within the waiting thread's
timeout.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import SimulatedConfig
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.simulated_gpus import SimHandle, SimulatedGpus


class _EventSet:
    """An event set: the GPUs registered on it, and whether its waits were ended."""

    def __init__(self) -> None:
        self.gpus: set[int] = set()
        self.ended = False


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
        return _EventSet()

    def register_xid_events(self, handle: SimHandle, event_set: Any) -> None:
        self._gpu(handle, "nvmlEventTypeXidCriticalError")
        event_set.gpus.add(handle.gpu)

    def event_wait(self, event_set: Any, timeout_ms: int) -> tuple[SimHandle, int]:
        self.calls["nvmlEventSetWait"] += 1
        deadline = time.monotonic() + timeout_ms / 1000
        with self._wake:
            while True:
                event = self._due_event(event_set)
                if event is not None:
                    return SimHandle(event[0]), event[1]
                left = deadline - time.monotonic()
                if event_set.ended or left <= 0:
                    raise NvmlError(nvml.ERROR_TIMEOUT, "Timeout")
                self._wake.wait(left)  # until inject_xid, end_event_wait or the timeout

    def end_event_wait(self, event_set: Any) -> None:
        with self._wake:
            event_set.ended = True
            self._wake.notify_all()

    def _due_event(self, event_set: Any) -> tuple[int, int] | None:
        now = self._clock()
        for item in list(self._events):
            due, gpu, code = item
            if due <= now and gpu in event_set.gpus:
                self._events.remove(item)
                return gpu, code
        return None

    def event_set_free(self, event_set: Any) -> None:
        self.calls["nvmlEventSetFree"] += 1
