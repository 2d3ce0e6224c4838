"""`XidWatcher.stop` never frees the NVML event set while its thread may still wait on it.

The defect: `stop` joined the thread with a timeout and then freed the event set whether or
not the thread had returned from `nvmlEventSetWait`: a use-after-free inside the driver library.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.xid import XidWatcher


class SlowEvents:
    """An NVML client whose event wait blocks until released, recording frees during waits."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = 0
        self.freed: list[int] = []  # how many waits were in progress at each free
        self.lock = threading.Lock()

    def event_set_create(self) -> Any:
        return object()

    def register_xid_events(self, handle: Any, event_set: Any) -> None:
        pass

    def event_wait(self, event_set: Any, timeout_ms: int) -> tuple[Any, int]:
        with self.lock:
            self.waiting += 1
        self.release.wait(30)
        with self.lock:
            self.waiting -= 1
        raise NvmlError("timeout", nvml.ERROR_TIMEOUT)

    def end_event_wait(self, event_set: Any) -> None:
        pass  # as NVML: a wait in progress cannot be ended early

    def event_set_free(self, event_set: Any) -> None:
        with self.lock:
            self.freed.append(self.waiting)


class _Gpu:
    handle, uuid = object(), "GPU-0"


def test_stop_leaves_the_event_set_to_a_thread_still_waiting() -> None:
    client = SlowEvents()
    watcher = XidWatcher(client, SelfTelemetry(), "nvml", logging.getLogger("t"), join_timeout=0.1)  # type: ignore[arg-type]
    assert watcher.register([_Gpu()]) == 1  # type: ignore[list-item]
    watcher.start()
    for _ in range(500):  # bounded: until the thread is inside the wait
        if client.waiting:
            break
        threading.Event().wait(0.01)
    thread = watcher.thread
    assert thread is not None
    watcher.stop()  # the wait outlasts the join timeout
    assert client.freed == []  # not freed under the waiting thread
    client.release.set()
    thread.join(10)
    assert not thread.is_alive()
    assert client.freed == [0]  # freed once, by the thread, after its wait returned


def test_stop_without_a_thread_frees_at_once() -> None:
    client = SlowEvents()
    watcher = XidWatcher(client, SelfTelemetry(), "nvml", logging.getLogger("t"))  # type: ignore[arg-type]
    watcher.register([_Gpu()])  # type: ignore[list-item]
    watcher.stop()
    watcher.stop()
    assert client.freed == [0]
