"""The `nvml` receiver: polls GPUs through an `NvmlClient`, one ResourceMetrics per device.

Every NVML call runs in a single worker thread the receiver owns (plus the XID event thread),
so the event loop never blocks. NVML is opened lazily on the first collection and, when the
library is missing, reopened with exponential backoff while the receiver reports the `nvml`
source down: the agent keeps running and starts reporting GPUs once the driver appears.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from otelgpu.component.clock import Clock, RealClock
from otelgpu.component.component import Host, MetricsConsumer, Settings
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch
from otelgpu.receivers.nvml.cgroup import ContainerResolver
from otelgpu.receivers.nvml.collect import Collector
from otelgpu.receivers.nvml.config import (
    Backend,
    NvmlReceiverConfig,
    ReplayConfig,
    SimulatedConfig,
)
from otelgpu.receivers.nvml.devices import Device, dcgm_device_set, discover, unmatched
from otelgpu.receivers.nvml.nvml import NvmlClient, NvmlError
from otelgpu.receivers.nvml.reading import Cycle
from otelgpu.receivers.nvml.real_nvml import RealNvml
from otelgpu.receivers.nvml.replay import ReplayNvml
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from otelgpu.receivers.nvml.sources import Plan
from otelgpu.receivers.nvml.xid import XidWatcher
from otelgpu.scraperhelper.scraper import ScrapeController

SOURCE = "nvml"
# Where the node's name comes from (the downward API's spec.nodeName): ours, then
# dcgm-exporter's variable, so its manifests' env works unchanged.
NODE_NAME_ENVS = ("K8S_NODE_NAME", "NODE_NAME")
NVML_LIBRARY = "libnvidia-ml.so.1"  # what nvidia-ml-py loads on Linux
UNKNOWN_DEVICES = "otelgpu_nvml_unknown_devices_total"
MAX_BACKOFF = 300.0
CLOSE_TIMEOUT = 5.0
# Seconds between GPM's first sample and the first collection: NVML asks for over 100 ms
# between two samples (GPM's counters refresh that often).
GPM_REFRESH = 0.2
T = TypeVar("T")


def nvml_library_present() -> bool:
    """Whether this node has the NVML library (loads it; does not initialise NVML)."""
    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return False
    return True


def make_client(
    config: NvmlReceiverConfig, clock: Clock, logger: logging.Logger | None = None
) -> NvmlClient:
    """The backend the config asks for (`auto`: NVML wherever the library is present)."""
    if config.backend is Backend.REPLAY:
        chosen = config.replay or ReplayConfig()
        log = logger or logging.getLogger(__name__)
        return ReplayNvml(chosen.record_path(), chosen.phase, log)
    if config.use_simulated(lambda: nvml_library_present()):  # looked up late: tests replace it
        return SimulatedNvml(config.simulated or SimulatedConfig(), clock.monotonic)
    return RealNvml()


def host_name() -> str:
    """`host.name` of the GPUs: the Kubernetes node name when the downward API gives it (in a
    pod, the hostname is the pod's name unless it runs with hostNetwork), else the hostname."""
    for variable in NODE_NAME_ENVS:
        name = os.environ.get(variable, "").strip()
        if name:
            return name
    return socket.gethostname()


class NvmlReceiver:
    """Reads NVIDIA GPUs (and MIG instances, processes, XID events) every interval."""

    def __init__(
        self,
        settings: Settings,
        config: NvmlReceiverConfig,
        next: MetricsConsumer,
        *,
        client: NvmlClient | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._settings = settings
        self._config = config
        self._next = next
        self._clock = clock or RealClock()
        self.client = client or make_client(config, self._clock, settings.logger)
        self._plan = Plan.build(config.read_metrics())  # the health summary's inputs too
        self._controller: ScrapeController | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._devices: list[Device] | None = None
        self._collector: Collector | None = None
        self._xid: XidWatcher | None = None
        self._start_ns = 0
        self._backoff = config.collection_interval
        self._retry_at = 0.0

    async def start(self, host: Host) -> None:
        """Starts the scrape loop; NVML itself is opened by the first collection."""
        self._settings.telemetry.register_source(SOURCE)
        counters = self._config.counters_csv
        if counters is not None:  # what its rows ask for that is not served as asked
            self._settings.logger.info("counters_csv: %s", counters.summary())
            for note in counters.notes():
                level = logging.WARNING if note in counters.unserved() else logging.INFO
                self._settings.logger.log(level, "counters_csv: %s", note)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"nvml-{self._settings.id}")
        self._controller = ScrapeController(
            settings=self._settings,
            scrape=self.scrape,
            next=self._next,
            interval=self._config.collection_interval,
            clock=self._clock,
        )
        await self._controller.start()

    async def scrape(self) -> Batch:
        """One collection (opening NVML first if needed); empty while NVML is unavailable."""
        if self._collector is None:
            if not await self._open():
                return ()
            assert self._collector is not None and self._devices is not None
            if await self._run(self._collector.prime, self._devices):
                # GPM's first samples: the collection below has its figures, at start and
                # after a reload (whose old series are served meanwhile), not one cycle later.
                await asyncio.sleep(GPM_REFRESH)
        assert self._collector is not None and self._devices is not None
        xids = self._xid.snapshot() if self._xid is not None else {}
        watched = self._xid.watched if self._xid is not None else frozenset()
        cycle = Cycle(now_ns=time.time_ns(), start_ns=self._start_ns, xids=xids, xid_gpus=watched)
        batch = await self._run(self._collector.collect, self._devices, cycle)
        self._settings.telemetry.source_ok(SOURCE)
        return batch

    async def _open(self) -> bool:
        now = self._clock.monotonic()
        if now < self._retry_at:
            return False
        try:
            await self._run(self._open_blocking)
        except NvmlError as exc:
            self._retry_at = now + self._backoff
            self._settings.telemetry.source_failed(
                SOURCE, f"{exc} (retrying in {self._backoff:g}s)"
            )
            self._backoff = min(self._backoff * 2, MAX_BACKOFF)
            return False
        self._backoff = self._config.collection_interval
        self._start_ns = self._start_ns or time.time_ns()  # counters count from here
        return True

    def _open_blocking(self) -> None:
        log = self._settings.logger
        self.client.init()
        try:
            devices = discover(self.client, self._config.devices, host_name(), log)
            self._check_devices(devices)
            dcgm_device_set(devices, self._config.dcgm_devices)
            for device in devices if self._plan.gpm else ():
                # A MIG instance is sampled through its GPU (nvmlGpmMigSampleGet).
                parent = device.parent
                device.gpm = parent.gpm if parent is not None else self._supports_gpm(device)
            if "nvidia.gpu.xid.errors" in self._plan.enabled:
                self._xid = self._watch_xids([d for d in devices if not d.is_mig])
        except NvmlError:
            self.client.shutdown()  # half-open: start again from init next time
            raise
        resolver = ContainerResolver(self._config.host_proc) if self._config.processes else None
        self._devices = devices
        self._collector = Collector(
            client=self.client,
            plan=self._plan,
            emitted=self._config.enabled_metrics(),
            only=self._config.kept_points(),
            resolver=resolver,
            telemetry=self._settings.telemetry,
            receiver=str(self._settings.id),
            logger=log,
        )

    def _check_devices(self, devices: list[Device]) -> None:
        """Marks simulated GPUs as such, and says which `devices:` entries matched nothing."""
        log = self._settings.logger
        if isinstance(self.client, SimulatedNvml):
            for device in devices:
                device.resource[semconv.SIMULATED] = True
            log.warning(
                "SIMULATED GPUs: %d invented GPUs from the simulated backend (backend: %s), "
                "not real hardware; their series carry %s=true",
                sum(not d.is_mig for d in devices),
                self._config.backend.value,
                semconv.SIMULATED,
            )
        elif isinstance(self.client, ReplayNvml):
            for device in devices:
                device.resource[semconv.SIMULATED] = True
            log.warning(
                "REPLAYED GPUs: %d GPUs of %s answered from the record %s (phase %s), not this "
                "node's hardware; their series carry %s=true",
                sum(not d.is_mig for d in devices),
                self.client.board,
                self.client.path,
                self.client.phase,
                semconv.SIMULATED,
            )
        for entry in unmatched(self._config.devices, devices):
            log.warning(
                "devices: %r matches no GPU on this node (GPUs found: %s); it is left out",
                entry,
                ", ".join(f"{d.index} {d.uuid}" for d in devices if not d.is_mig) or "none",
            )
            self._settings.telemetry.count(
                UNKNOWN_DEVICES,
                1,
                receiver=str(self._settings.id),
                device=str(entry),
            )

    def _watch_xids(self, gpus: list[Device]) -> XidWatcher | None:
        log = self._settings.logger
        watcher = XidWatcher(self.client, self._settings.telemetry, str(self._settings.id), log)
        try:
            watcher.register(gpus)
        except NvmlError as exc:  # no event support here: every other metric still works
            log.warning("XID events unavailable, nvidia.gpu.xid.errors stays empty: %s", exc)
            return None
        watcher.start()
        return watcher

    def _supports_gpm(self, gpu: Device) -> bool:
        try:
            return self.client.gpm_supported(gpu.handle)
        except NvmlError:
            return False

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        if self._executor is None:  # scrape() called directly, without start()
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="nvml")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def shutdown(self) -> None:
        """Stops the loop and the XID thread, releases NVML; idempotent."""
        controller, self._controller = self._controller, None
        if controller is not None:
            await controller.shutdown()
        executor, self._executor = self._executor, None
        if executor is None:
            return
        closing = asyncio.get_running_loop().run_in_executor(executor, self._close_blocking)
        try:
            # Queued behind any NVML call still running: a hung driver must not hang shutdown.
            await asyncio.wait_for(closing, CLOSE_TIMEOUT)
        except TimeoutError:
            self._settings.logger.warning(
                "NVML did not answer within %gs; leaving it", CLOSE_TIMEOUT
            )
            executor.shutdown(wait=False, cancel_futures=True)
            return
        executor.shutdown(wait=True)  # idle by now: its thread just exits

    def _close_blocking(self) -> None:
        xid, self._xid = self._xid, None
        if xid is not None:
            xid.stop()
        for device in self._devices or ():
            for sample in device.gpm_samples:
                with contextlib.suppress(NvmlError):  # releasing anyway
                    self.client.gpm_sample_free(sample)
            device.gpm_samples = []
        if self._collector is not None:
            self.client.shutdown()
        self._collector = None
        self._devices = None
