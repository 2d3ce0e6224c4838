"""The background refresh of the pod-resources snapshot: interval, on-demand, backoff.

Runs as one task owned by the processor. It asks the kubelet every `refresh_interval`,
and sooner (at most once a second) when `process` met a device it had never heard of.
A failed refresh keeps the last good snapshot, reports the source down (logged once per
change of state), and backs off exponentially with jitter before asking again, never longer
than `refresh_interval`: a kubelet that recovers is read again within one interval, as a
healthy one is, so labels follow its truth that soon. On-demand refreshes wait while it fails,
so a rate-limited kubelet (RESOURCE_EXHAUSTED) is asked no more often than a healthy one. Every
tick (≤ 1 s) publishes the snapshot's age.

An answer equal to the last one handed on (the same pods, in any order, and the same
allocatable devices) is not handed on again: the snapshot it would build is the one in use,
and on a node with a thousand pods the build costs more than everything else the processor
does in a cycle. The answer still counts as a success (the source is up, the snapshot's age
restarts).

Every answer, changed or not, is also posted to the service's pod listing board
(`otelgpu.component.pod_listing`), under the socket's path, and every failure withdraws what
was posted: the kubelet_stats receiver counts the pods the summary misses against it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

from otelgpu.component.clock import Clock
from otelgpu.component.component import Settings
from otelgpu.component.pod_listing import PodListings, PodName
from otelgpu.processors.k8s_attributes.pod_resources import (
    DeviceAllocation,
    PodAllocation,
    PodResourcesClient,
    PodResourcesError,
)

SOURCE = "pod_resources"
AGE_GAUGE = "otelgpu_pod_resources_snapshot_age_seconds"
ERRORS = "otelgpu_pod_resources_errors_total"
REFRESHES = "otelgpu_pod_resources_refreshes_total"
TICK = 1.0  # seconds between age updates; also the floor between two refreshes
BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 60.0

OnAnswer = Callable[
    [tuple[PodAllocation, ...], tuple[DeviceAllocation, ...] | None], Awaitable[None]
]


class SnapshotRefresher:
    """Asks the kubelet on time and hands each good answer to `on_answer`."""

    def __init__(
        self,
        *,
        settings: Settings,
        client: PodResourcesClient,
        on_answer: OnAnswer,
        interval: float,
        timeout: float,
        clock: Clock,
        rng: random.Random | None = None,
        listings: PodListings | None = None,
        listing_source: str = "",
    ) -> None:
        self._settings = settings
        self._client = client
        self._on_answer = on_answer
        self._interval = interval
        self._timeout = timeout
        self._clock = clock
        self._rng = rng or random.Random()
        self._id = str(settings.id)
        self._wanted = False
        self._failures = 0
        self._last_ok: float | None = None
        self._last_try = float("-inf")
        self._last_answer: tuple[object, object] | None = None
        self._listings = listings
        self._listing_source = listing_source
        self._names: frozenset[PodName] = frozenset()  # the pods of the last answer
        self.attempts = 0
        self.rebuilds = 0  # answers handed on to `on_answer` (unchanged ones are not)
        self.first_attempt = asyncio.Event()  # set once the kubelet answered or failed once

    def request(self) -> None:
        """Asks for an early refresh (an unknown device was seen). No I/O; never blocks."""
        self._wanted = True

    def age(self) -> float | None:
        """Seconds since the last good answer; None before the first one."""
        return None if self._last_ok is None else self._clock.monotonic() - self._last_ok

    async def run(self) -> None:
        """The loop: refresh when due (or asked), publish the age, sleep until the next tick."""
        due = self._clock.monotonic()
        while True:
            now = self._clock.monotonic()
            early = self._wanted and self._failures == 0 and now - self._last_try >= TICK
            if now >= due or early:
                trigger = "interval" if now >= due else "unknown_device"
                self._wanted = False
                due = await self._refresh(trigger)
            self._publish_age()
            await self._clock.sleep(max(0.0, min(TICK, due - self._clock.monotonic())))

    @property
    def attempt_timeout(self) -> float:
        """How long one refresh may take at most."""
        return 2 * self._timeout + 1

    async def _refresh(self, trigger: str) -> float:
        """One refresh; returns when the next one is due."""
        self.attempts += 1
        self._last_try = self._clock.monotonic()
        telemetry = self._settings.telemetry
        telemetry.count(REFRESHES, 1, processor=self._id, trigger=trigger)
        listings, source = self._listings, self._listing_source
        ticket = listings.asking(source) if listings is not None else 0
        try:
            # The client bounds each request; this bounds a client that would not.
            async with asyncio.timeout(self.attempt_timeout):
                pods = await self._client.list()
                allocatable = await self._client.allocatable()
            # Tuples of frozen values: equal answers build equal snapshots. The comparison
            # is cheap when unchanged (the client hands back the same tuple for the same
            # pods, whatever order the kubelet listed them in, and `==` on a tuple checks
            # identity first) and stops at the first difference otherwise.
            answer = (pods, allocatable)
            if answer != self._last_answer:
                await self._on_answer(pods, allocatable)
                self._last_answer = answer
                self._names = frozenset((pod.namespace, pod.name) for pod in pods)
                self.rebuilds += 1
            if listings is not None:
                listings.answered(source, ticket, self._names)
        except Exception as exc:  # kubelet errors, timeouts, a bad answer: never end the loop
            if listings is not None:
                listings.failed(source)
            return self._failed(exc)
        finally:
            self.first_attempt.set()
        self._failures = 0
        self._last_ok = self._clock.monotonic()
        telemetry.source_ok(SOURCE)
        return self._last_ok + self._interval

    def _failed(self, exc: Exception) -> float:
        if isinstance(exc, PodResourcesError):
            code, reason = exc.code, str(exc)
        elif isinstance(exc, TimeoutError):
            code, reason = "DEADLINE_EXCEEDED", "no answer in time"
        else:
            code, reason = "INTERNAL", f"{type(exc).__name__}: {exc}"
        self._failures += 1
        telemetry = self._settings.telemetry
        telemetry.count(ERRORS, 1, processor=self._id, code=code)
        telemetry.source_failed(SOURCE, reason)
        return self._clock.monotonic() + self.backoff(self._failures)

    def backoff(self, failures: int) -> float:
        """Seconds to wait after `failures` failures in a row: 1 s doubling (±20 %), up to the
        refresh interval (and never above `BACKOFF_MAX`)."""
        base = min(BACKOFF_MAX, BACKOFF_INITIAL * 2.0 ** min(failures - 1, 16))
        return min(self._interval, base * self._rng.uniform(0.8, 1.2))

    def _publish_age(self) -> None:
        age = self.age()
        if age is not None:
            self._settings.telemetry.set_gauge(AGE_GAUGE, age, processor=self._id)
