"""The `container_env` processor: runtime business labels for the container holding a GPU.

`process()` is a dictionary lookup over the latest snapshot; a background task owned by the
processor refreshes the snapshot from the runtime(s) every `refresh_interval`, and early
(at most once a second) when a batch names a container the snapshot does not know.
`start` waits (bounded by `timeout`) until every runtime has answered or failed once, so the
pipeline's first export is not a set of unlabelled series that the labelled ones then replace.

A GPU process (`process.pid` with `container.id`) is labelled by the container it runs in,
names included. When k8s_attributes left a note of who the kubelet allocated the process's GPU
to, a process outside that allocation (another pod's, or the host's) is counted in
`otelgpu_gpu_processes_outside_allocation` and logged once, so GPU squatters can be found.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
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
from otelgpu.processors.container_env.records import Selectors
from otelgpu.processors.container_env.runtime import ContainerRuntime
from otelgpu.processors.container_env.snapshot import Match, Snapshot, WorkloadKey
from otelgpu.processors.container_env.source import RuntimeSource

# Runtimes to use, by the config: (runtime, expected). Injected so unit tests need no socket.
RuntimeFactory = Callable[[ContainerEnvProcessorConfig], Sequence[tuple[ContainerRuntime, bool]]]

_MIN_REFRESH_GAP = 1.0  # early refreshes never come closer than this
_MAX_REMEMBERED_MISSES = 4096
OUTSIDE_ALLOCATION = "otelgpu_gpu_processes_outside_allocation"
_UIDS_PER_NAME = 4  # pod uids remembered per (namespace, pod, container)


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
        # when the listing behind the current snapshot began (`_newer_than_snapshot`), and
        # when each container the snapshot matches by name was first listed (`_unconfirmed`)
        self._listed_from = float("-inf")
        self._appeared: dict[str, float] = {}  # container ID → when first listed
        # per (namespace, pod, container): each pod uid listed under it → [when the listing
        # that first showed it began, when the first complete listing without it began (inf:
        # still listed)]; per container: when the last complete listing before the one that
        # first showed it began (`_held_by_other_uid`)
        self._uids_of_name: dict[WorkloadKey, dict[str, list[float]]] = {}
        self._unseen_at: dict[str, float] = {}
        self._refreshing = asyncio.Lock()
        self._first_refresh: asyncio.Event | None = None
        self._squatters_logged: set[tuple[object, object]] = set()

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
        for source in self._sources:
            source.down()
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
                    squatter = self._outside_allocation(gpu, pid, cid, match, reason, holders)
                    if squatter is not None:
                        outside.add(squatter)
                elif rm.notes and isinstance(listed := rm.notes.get(notes.GPU_PROCESSES), tuple):
                    outside = set() if outside is None else outside
                    outside.update(self._listed_outside(gpu, listed, snapshot, holders))
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

    def _listed_outside(
        self,
        device: object,
        listed: tuple[object, ...],
        snapshot: Snapshot,
        holders: Collection[object],
    ) -> list[tuple[object, object]]:
        """The (GPU, pid) of each process the receiver listed on a GPU's own resource
        (`notes.GPU_PROCESSES`, no per-process series) that runs outside its allocation."""
        found = []
        for entry in listed:
            if not (isinstance(entry, tuple) and len(entry) == 2):
                continue
            pid, container = entry
            cid = str(container)
            match = snapshot.by_id.get(cid) if cid else None
            reason = "by_id" if match is not None else ""
            squatter = self._outside_allocation(device, pid, cid, match, reason, holders)
            if squatter is not None:
                found.append(squatter)
        return found

    def _outside_allocation(
        self,
        device: object,
        pid: object,
        cid: str,
        match: Match | None,
        reason: str,
        holders: Collection[object],
    ) -> tuple[object, object] | None:
        """The (GPU, pid) of a GPU process (in container `cid`, "" for none) running outside
        the allocation k8s_attributes noted; None when it runs inside, or when that cannot be
        told (its container is not known to the runtime yet)."""
        if match is not None and reason == "by_id":
            identity = match.identity
            where = (
                identity.get(semconv.K8S_NAMESPACE_NAME, ""),
                identity.get(semconv.K8S_POD_NAME, ""),
                identity.get(semconv.K8S_CONTAINER_NAME, ""),
            )
            if where in holders:
                return None
            container = "/".join(where) if all(where) else cid
        elif not cid:
            container = "the host"
        else:
            return None
        key = (device, pid)
        if key not in self._squatters_logged:
            if len(self._squatters_logged) >= _MAX_REMEMBERED_MISSES:
                self._squatters_logged.clear()
            self._squatters_logged.add(key)
            allocated = ", ".join(sorted(_holder_text(h) for h in holders)) or "nobody"
            self._log.warning(
                "process %s of %s uses GPU %s, which the kubelet allocated to %s",
                key[1],
                container,
                key[0],
                allocated,
            )
        return key

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
            since = self._newer_than_snapshot(rm)
            if since is not None:
                self._note_miss(("holder", workload, since))  # one early refresh settles it
                return None, "holder_changed"
            if self._unconfirmed(rm, match):
                return None, "holder_unconfirmed"  # the kubelet's next answer settles it
            if self._held_by_other_uid(rm, match):
                return None, "holder_stale"  # the kubelet listing the pod anew settles it
            return match, "by_workload"
        if not cid and not named:
            return None, "no_container" if workload[1] else ""
        if degraded:
            return None, "runtime_down"
        self._note_miss(cid or workload)
        return None, "container_not_found"

    def _newer_than_snapshot(self, rm: ResourceMetrics) -> float | None:
        """Since when the resource's holder is listed, when that is newer than the runtime
        listing behind the snapshot (else None).

        A pod deleted and created again under its name is the same (namespace, pod, container)
        to the kubelet, and a listing older than the new pod may still hold the old pod's
        running container, whose labels must not be lent to the new one. k8s_attributes notes
        since when the kubelet lists this container on this device (`notes.HOLDER_SINCE`): a
        name is matched only with a listing that began after that and that every runtime
        answered (the next refresh, asked for at once); its labels are absent for that long,
        never borrowed. Names without the note (no k8s_attributes before this processor) are
        matched at once."""
        since = rm.notes.get(notes.HOLDER_SINCE) if rm.notes else None
        return since if isinstance(since, float) and since > self._listed_from else None

    def _unconfirmed(self, rm: ResourceMetrics, match: Match) -> bool:
        """Whether the runtime first listed the container matched by name after the kubelet
        last answered (`notes.HOLDERS_CONFIRMED`): it may be a new pod under the name of a
        deleted one that the kubelet, slow or down, still says holds this device. Its labels
        wait for a kubelet answer given after it appeared."""
        confirmed = rm.notes.get(notes.HOLDERS_CONFIRMED) if rm.notes else None
        if not isinstance(confirmed, float):
            return False
        appeared = self._appeared.get(match.container_id)
        return appeared is not None and appeared > confirmed

    def _held_by_other_uid(self, rm: ResourceMetrics, match: Match) -> bool:
        """Whether the kubelet's (device, name) pair belongs to another pod uid than that of
        the container matched by name (`notes.HOLDER_SINCE`, `notes.HOLDERS_CHANGED`).

        The kubelet names pods, not pod uids, and its answer can lag the runtime: a pod
        deleted and created again under its name (a StatefulSet's pod) on another GPU can
        still be listed on the old pod's GPU. A pair listed since before an older pod uid's
        container under the name was last listed belongs to that older uid: the newer
        container's labels wait until what the kubelet lists for the pod changes after the
        newer container may have started (the start of the last complete listing without
        it), or the pair goes. A pair first listed after the older uid's containers were gone
        is the newer one's."""
        since = rm.notes.get(notes.HOLDER_SINCE) if rm.notes else None
        changed = rm.notes.get(notes.HOLDERS_CHANGED) if rm.notes else None
        if not (isinstance(since, float) and isinstance(changed, float)) or not match.pod_uid:
            return False
        cid = match.container_id
        if not cid or changed > self._unseen_at.get(cid, float("inf")):
            return False
        uids = self._uids_of_name.get(_workload(match), {})
        mine = uids.get(match.pod_uid)
        if mine is None:
            return False
        return any(
            first < mine[0] and gone > since
            for uid, (first, gone) in uids.items()
            if uid != match.pod_uid
        )

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
        # When each container was first listed.
        listed_before = self._appeared
        self._appeared = {cid: self._appeared.get(cid, started) for cid in self._snapshot.by_id}
        # A runtime that is down keeps labelling from its last snapshot, but what it does not
        # know is "runtime_down", not "container_not_found" (and asks for no early refresh).
        self._degraded = not found or any(not s.up for s in found)
        complete = -math.inf if self._degraded else started
        self._note_uids(listed_before, previous=self._listed_from, now=complete)
        if not self._degraded:  # the snapshot is this listing's only when every runtime answered
            self._listed_from = started

    def _note_uids(self, listed_before: Collection[str], previous: float, now: float) -> None:
        """Notes which pod uids each (namespace, pod, container) is listed under, from when
        to when, and for each container listed for the first time the start of the last
        complete listing before (`previous`). Only a complete listing (`now` set) says a
        uid is gone."""
        # name → uid → when the listing that first showed one of its containers began
        listed: dict[WorkloadKey, dict[str, float]] = {}
        unseen_at: dict[str, float] = {}
        for cid, match in self._snapshot.by_id.items():
            unseen_at[cid] = self._unseen_at[cid] if cid in listed_before else previous
            name = _workload(match)
            if all(name) and match.pod_uid:
                uids = listed.setdefault(name, {})
                uids[match.pod_uid] = min(uids.get(match.pod_uid, math.inf), self._appeared[cid])
        self._unseen_at = unseen_at
        for name, uids in listed.items():
            if name not in self._uids_of_name and len(self._uids_of_name) >= _MAX_REMEMBERED_MISSES:
                self._uids_of_name.clear()  # bounds memory if names churn
            known = self._uids_of_name.setdefault(name, {})
            for uid, first in uids.items():
                known.setdefault(uid, [first, math.inf])[1] = math.inf
            while len(known) > _UIDS_PER_NAME:  # the oldest go first
                del known[min(known, key=lambda uid: known[uid][0])]
        if now != -math.inf:
            for name, known in self._uids_of_name.items():
                for uid, interval in known.items():
                    if interval[1] == math.inf and uid not in listed.get(name, ()):
                        interval[1] = now

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


def _workload(match: Match) -> WorkloadKey:
    identity = match.identity
    return (
        identity.get(semconv.K8S_NAMESPACE_NAME, ""),
        identity.get(semconv.K8S_POD_NAME, ""),
        identity.get(semconv.K8S_CONTAINER_NAME, ""),
    )


def _holder_text(holder: object) -> str:
    return "/".join(map(str, holder)) if isinstance(holder, tuple) else str(holder)


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
