"""The `container_env` processor: runtime business labels for the container holding a GPU.

`process()` is a dictionary lookup over the latest snapshot; a background task owned by the
processor refreshes the snapshot from the runtime(s) every `refresh_interval`, and early
(at most once a second) when a batch names a container the snapshot does not know.
`start` waits (bounded by `timeout`) until every runtime has answered or failed once, so the
pipeline's first export is not a set of unlabelled series that the labelled ones then replace.

A GPU process (`process.pid` with `container.id`) is labelled by the container it runs in,
names included. When k8s_attributes left a note of who the kubelet allocated the process's GPU
to, a process outside that allocation (another pod's, or the host's) is counted in
`otelgpu_gpu_processes_outside_allocation` and logged once, so GPU squatters can be found
(`outside_allocation`). A match by name waits while the times k8s_attributes noted say the
kubelet may mean another container under that name (`listing_history`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Collection, Sequence

from otelgpu.component.clock import Clock
from otelgpu.component.component import Host, Settings
from otelgpu.component.tasks import cancel_and_wait
from otelgpu.config.types import KeyFilter
from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import Batch, ResourceMetrics, point_count, with_resource
from otelgpu.processors.container_env.audit import Audit
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.keys import KeySelector
from otelgpu.processors.container_env.listing_history import ListingHistory
from otelgpu.processors.container_env.outside_allocation import OutsideAllocation
from otelgpu.processors.container_env.records import Selectors
from otelgpu.processors.container_env.runtime import ContainerRuntime
from otelgpu.processors.container_env.snapshot import Match, Snapshot
from otelgpu.processors.container_env.source import RuntimeSource

# Runtimes to use, by the config: (runtime, expected). Injected so unit tests need no socket.
RuntimeFactory = Callable[[ContainerEnvProcessorConfig], Sequence[tuple[ContainerRuntime, bool]]]

_MIN_REFRESH_GAP = 1.0  # early refreshes never come closer than this
_MAX_REMEMBERED_MISSES = 4096
OUTSIDE_ALLOCATION = "otelgpu_gpu_processes_outside_allocation"


class ContainerEnvProcessor:
    """Adds `container.env.*`, `container.label.*`, `k8s.pod.label.*`, `k8s.pod.annotation.*`.

    A resource is matched by `container.id` (from the nvml process mapping) or by
    `k8s.namespace.name` + `k8s.pod.name` + `k8s.container.name` (from k8s_attributes),
    never by pod alone. A `container.id` match also fills in missing k8s names from the
    runtime's `io.kubernetes.*` labels. Existing attributes are never overwritten.
    """

    def __init__(
        self,
        settings: Settings,
        config: ContainerEnvProcessorConfig,
        runtimes: RuntimeFactory,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._settings = settings
        self._config = config
        self._runtimes = runtimes
        # The agent's clock unless a test gives one: the notes' times it compares are on it
        self._clock = clock or settings.clock
        self._id = str(settings.id)
        self._log = settings.logger
        self._telemetry = settings.telemetry
        self._audit = Audit(self._id, settings.telemetry, settings.logger)
        self._sources: list[RuntimeSource] = []
        self._snapshot = Snapshot()
        self._degraded = True  # no runtime has answered yet
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._missed: set[object] = set()
        self._history = ListingHistory()  # what the stale-holder checks compare with
        self._refreshing = asyncio.Lock()
        self._first_refresh: asyncio.Event | None = None
        self._outside = OutsideAllocation(settings.logger)

    @property
    def snapshot(self) -> Snapshot:
        """The lookup tables `process` reads (empty until a runtime answers)."""
        return self._snapshot

    async def start(self, host: Host) -> None:
        runtimes = self._runtimes(self._config)
        self._sources = [self._source(runtime, expected) for runtime, expected in runtimes]
        names = ", ".join(f"{s.name} at {s.runtime.endpoint}" for s in self._sources)
        mode = self._config.runtime
        self._log.info("container_env: runtime %s (%s)", mode, names)
        self._wake = asyncio.Event()
        self._first_refresh = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"{self._id} refresh")
        # Every runtime answers or fails within `timeout`; the margin covers composing.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._config.timeout + 1.0):
                await self._first_refresh.wait()

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        sources, self._sources = self._sources, []  # with what they listed
        for source in sources:
            with contextlib.suppress(Exception):
                await source.runtime.close()
        self._snapshot, self._degraded = Snapshot(), True

    # --- the hot path: lookups only -------------------------------------------------------

    def process(self, batch: Batch) -> Batch:
        snapshot, degraded = self._snapshot, self._degraded
        unmatched: Counter[tuple[str, object]] = Counter()  # (reason, hw.id) → points
        outside: set[tuple[object, object]] | None = None
        out: list[ResourceMetrics] = []
        for rm in batch:
            if not rm.metrics:  # an identity that is gone (see ResourceMetrics): nothing to label
                out.append(rm)
                continue
            match, reason = self._lookup(rm, snapshot, degraded)
            holders = rm.notes.get(notes.GPU_HOLDERS) if rm.notes else None
            if isinstance(holders, Collection):
                pid = rm.resource.get(semconv.PROCESS_PID)
                gpu = rm.resource.get(semconv.HW_ID)
                if pid is not None:
                    outside = set() if outside is None else outside
                    cid = _text(rm, semconv.CONTAINER_ID)
                    squatter = self._outside.process(gpu, pid, cid, match, reason, holders)
                    if squatter is not None:
                        outside.add(squatter)
                elif rm.notes and isinstance(listed := rm.notes.get(notes.GPU_PROCESSES), tuple):
                    outside = set() if outside is None else outside
                    outside.update(self._outside.listed(gpu, listed, snapshot, holders))
            if match is not None:
                out.append(_enrich(rm, match, by_id=reason == "by_id"))
                continue
            if reason:
                unmatched[(reason, rm.resource.get(semconv.HW_ID))] += point_count((rm,))
            out.append(rm)
        for (reason, device), n in unmatched.items():
            self._telemetry.unmatched_points(self._id, n, reason, device)
        if outside is not None:
            self._telemetry.set_gauge(OUTSIDE_ALLOCATION, float(len(outside)), processor=self._id)
        return tuple(out)

    def _lookup(
        self, rm: ResourceMetrics, snapshot: Snapshot, degraded: bool
    ) -> tuple[Match | None, str]:
        """The match and how it was found; or None and why not ("" when there is nothing to
        match: a GPU that no container holds)."""
        cid = _text(rm, semconv.CONTAINER_ID)
        workload = (
            _text(rm, semconv.K8S_NAMESPACE_NAME),
            _text(rm, semconv.K8S_POD_NAME),
            _text(rm, semconv.K8S_CONTAINER_NAME),
        )
        named = all(workload)
        if cid and (match := snapshot.by_id.get(cid)) is not None:
            return match, "by_id"
        if named and (match := snapshot.by_workload.get(workload)) is not None:
            since = self._history.newer_than_snapshot(rm)
            if since is not None:
                self._note_miss(("holder", workload, since))  # one early refresh settles it
                return None, "holder_changed"
            if self._history.unconfirmed(rm, match):
                return None, "holder_unconfirmed"  # the kubelet's next answer settles it
            if self._history.held_by_other_uid(rm, match):
                return None, "holder_stale"  # the kubelet listing the pod anew settles it
            return match, "by_workload"
        if not cid and not named:
            return None, "no_container" if workload[1] else ""
        if degraded:
            return None, "runtime_down"
        self._note_miss(cid or workload)
        return None, "container_not_found"

    def _note_miss(self, key: object) -> None:
        """Asks for one early refresh per unknown container (a container younger than the
        snapshot); a container that stays unknown costs no further refreshes."""
        if key in self._missed or self._wake is None:
            return
        if len(self._missed) >= _MAX_REMEMBERED_MISSES:
            self._missed.clear()
        self._missed.add(key)
        self._wake.set()

    # --- the background refresh -----------------------------------------------------------

    def _source(self, runtime: ContainerRuntime, expected: bool) -> RuntimeSource:
        return RuntimeSource(
            runtime,
            expected=expected,
            selectors=_selectors(self._config),
            audit=self._audit,
            telemetry=self._telemetry,
            logger=self._log,
            max_attributes=self._config.max_attributes,
            processor=self._id,
            timeout=self._config.timeout,
        )

    async def _run(self) -> None:
        warned = False
        while True:
            try:
                await self.refresh()
            except Exception:  # a bug must not end enrichment for good; log it and go on
                self._log.exception("container_env refresh failed")
            if self._first_refresh is not None:
                self._first_refresh.set()
            if not warned and not any(s.found for s in self._sources):
                warned = True
                self._log.warning(
                    "no container runtime answered yet; still probing every %gs",
                    self._config.refresh_interval,
                )
            await self._wait_next()

    async def refresh(self) -> None:
        """Refreshes every runtime once and publishes the merged snapshot."""
        async with self._refreshing:  # one refresh at a time: the caches are not shared-safe
            started = self._clock.monotonic()
            await asyncio.gather(*(s.refresh() for s in self._sources))
        found = [s for s in self._sources if s.found]
        self._snapshot = Snapshot.merge(s.snapshot for s in found if s.snapshot is not None)
        # A runtime that is down keeps labelling from its last snapshot, but what it does not
        # know is "runtime_down", not "container_not_found" (and asks for no early refresh).
        self._degraded = not found or any(not s.up for s in found)
        self._history.listed(self._snapshot, started, complete=not self._degraded)

    async def _wait_next(self) -> None:
        interval = self._config.refresh_interval
        gap = min(_MIN_REFRESH_GAP, interval)
        await self._clock.sleep(gap)
        assert self._wake is not None
        if interval > gap and not self._wake.is_set():
            sleeper = asyncio.ensure_future(self._clock.sleep(interval - gap))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()
        self._wake.clear()


def _enrich(rm: ResourceMetrics, match: Match, *, by_id: bool) -> ResourceMetrics:
    if not by_id:
        return with_resource(rm, match.attributes)
    if semconv.PROCESS_PID in rm.resource:
        # A process's names are its own container's, whatever an earlier processor guessed.
        rm = with_resource(rm, match.identity, override=True)
        return with_resource(rm, match.attributes)
    return with_resource(rm, {**match.identity, **match.attributes})


def _text(rm: ResourceMetrics, key: str) -> str:
    value = rm.resource.get(key)
    return value if isinstance(value, str) else ""


def _selectors(config: ContainerEnvProcessorConfig) -> Selectors:
    def make(section: str, key_filter: KeyFilter) -> KeySelector:
        return KeySelector(
            section,
            key_filter,
            allow_secret_like_keys=config.allow_secret_like_keys,
            max_value_length=config.max_value_length,
        )

    return Selectors(
        env=make("env", config.env),
        labels=make("labels", config.labels),
        pod_labels=make("pod_labels", config.pod_labels),
        annotations=make("annotations", config.annotations),
        owners=config.owners,
    )
