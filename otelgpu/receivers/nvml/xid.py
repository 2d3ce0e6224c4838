"""XID errors, counted per GPU and code from NVML events by a thread the receiver owns.

NVML reports XIDs as events (`nvmlEventTypeXidCriticalError`), not as a value to poll; a
"last XID" gauge would lose every XID but the last between two scrapes. The thread blocks in
`nvmlEventSetWait` with a short timeout (`WAIT_MS`) so `stop` takes effect within that timeout;
`stop` also asks the backend to end the wait at once (`end_event_wait`: the simulated and
replayed backends can, NVML cannot). A GPU's codes are kept latest last (an XID seen again
moves to the end), so the per-code counts also say which XID came last: dcgm-exporter's
`DCGM_FI_DEV_XID_ERRORS` is that code. `watched` are the GPUs registered for XID events (a GPU
that refused has no XID metric, rather than a count of 0 that would claim it had none).

Once the thread runs, it owns the event set and frees it as it exits: `stop` never frees it
under a wait still in progress (a driver call that outlasts the join would otherwise read
freed memory).
"""

from __future__ import annotations

import logging
import threading

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.devices import Device
from otelgpu.receivers.nvml.nvml import NvmlClient, NvmlError

WAIT_MS = 500


class XidWatcher:
    """Registers the GPUs for XID events and counts what arrives, until `stop`."""

    def __init__(
        self,
        client: NvmlClient,
        telemetry: SelfTelemetry,
        receiver: str,
        logger: logging.Logger,
        *,
        join_timeout: float = WAIT_MS / 1000 * 4,
    ) -> None:
        self._client = client
        self._telemetry = telemetry
        self._receiver = receiver
        self._log = logger
        self._lock = threading.Lock()
        self._counts: dict[str, dict[int, int]] = {}  # per GPU: code → count, latest last
        self.watched: frozenset[str] = frozenset()  # UUIDs of the GPUs registered
        self._stop = threading.Event()
        self._join_timeout = join_timeout
        self.thread: threading.Thread | None = None
        self._event_set: object = None

    def register(self, gpus: list[Device]) -> int:
        """Creates the event set and registers `gpus` (blocking); how many accepted."""
        self._event_set = self._client.event_set_create()
        accepted: list[str] = []
        for gpu in gpus:
            try:
                self._client.register_xid_events(gpu.handle, self._event_set)
                accepted.append(gpu.uuid)
            except NvmlError as exc:  # e.g. NOT_SUPPORTED on some boards: no XIDs from it
                self._log.info("GPU %s gives no XID events: %s", gpu.uuid, exc)
        self.watched = frozenset(accepted)
        return len(accepted)

    def start(self) -> None:
        """Starts the waiting thread (after `register`); from then on it owns the event set."""
        if self.thread is None and self._event_set is not None:
            self.thread = threading.Thread(target=self._run, name="nvml-xid", daemon=True)
            self.thread.start()

    def stop(self) -> None:
        """Stops the thread (blocks up to `join_timeout`); the event set is freed by the
        thread as it exits, or here if no thread ever ran."""
        self._stop.set()
        thread, self.thread = self.thread, None
        if thread is None:
            self._free()
            return
        event_set = self._event_set
        if event_set is not None:
            try:
                self._client.end_event_wait(event_set)
            except NvmlError as exc:
                self._log.debug("ending the XID wait early failed: %s", exc)
        thread.join(timeout=self._join_timeout)
        if thread.is_alive():
            self._log.warning(
                "the XID thread is still inside an NVML call; it frees the event set on return"
            )

    def _free(self) -> None:
        event_set, self._event_set = self._event_set, None
        if event_set is not None:
            try:
                self._client.event_set_free(event_set)
            except NvmlError as exc:
                self._log.debug("freeing the XID event set failed: %s", exc)

    def snapshot(self) -> dict[str, dict[int, int]]:
        """GPU UUID → XID code → count since the receiver started, latest XID last (only
        GPUs that had one)."""
        with self._lock:
            return {uuid: dict(codes) for uuid, codes in self._counts.items()}

    def poll_once(self, timeout_ms: int = WAIT_MS) -> bool:
        """Waits for one event and counts it; False on timeout. Never raises."""
        try:
            handle, code = self._client.event_wait(self._event_set, timeout_ms)
            uuid = self._client.uuid(handle)
        except NvmlError as exc:
            if exc.code != nvml.ERROR_TIMEOUT:
                self._failed(exc)
            return False
        with self._lock:
            codes = self._counts.setdefault(uuid, {})
            codes[code] = codes.pop(code, 0) + 1  # re-inserted: the latest is last
        self._log.warning("XID %d on GPU %s", code, uuid)
        return True

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.poll_once()
        finally:
            self._free()

    def _failed(self, exc: NvmlError) -> None:
        self._telemetry.count(
            "otelgpu_nvml_read_errors_total",
            1,
            receiver=self._receiver,
            source="nvmlEventSetWait",
        )
        # Don't spin on a persistent error (a lost GPU keeps answering at once).
        self._stop.wait(1.0)
