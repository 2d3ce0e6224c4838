"""One runtime as the processor tracks it: probed or expected, up or down, its last good
snapshot and that snapshot's age."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.container_env.audit import Audit
from otelgpu.processors.container_env.records import Record, Selectors, extract
from otelgpu.processors.container_env.runtime import (
    ContainerRef,
    ContainerRuntime,
    RuntimeUnavailable,
)
from otelgpu.processors.container_env.snapshot import Snapshot, SnapshotComposer

AGE_GAUGE = "otelgpu_container_env_snapshot_age_seconds"


class RuntimeSource:
    """Refreshes one runtime's snapshot and reports the runtime's health.

    An `expected` runtime (named in `runtime:`) is a self-telemetry source from the start,
    so it reads as down until it answers. A probed one (`runtime: auto`) stays silent until
    it first answers; from then on it is a source like any other.

    A runtime outage never changes labels: a refresh that fails (no answer, an error, too
    slow) reports the source down at once and keeps the last good snapshot, which goes on
    labelling; its age is published at every refresh, so stale labels are visible. Labels
    change only when the runtime answers with a different truth. Only running containers
    become records (`ContainerRef.running`): a stopped one is never read nor matched.
    """

    def __init__(
        self,
        runtime: ContainerRuntime,
        *,
        expected: bool,
        selectors: Selectors,
        audit: Audit,
        telemetry: SelfTelemetry,
        logger: logging.Logger,
        max_attributes: int,
        timeout: float,
        processor: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runtime = runtime
        self.found = expected
        self.snapshot: Snapshot | None = None
        self._selectors = selectors
        self._audit = audit
        self._telemetry = telemetry
        self._log = logger
        self._timeout = timeout
        self._processor = processor
        self._now = clock
        self._composer = SnapshotComposer(audit, max_attributes)
        self._records: dict[str, Record] = {}
        self._up = False
        self._last_ok: float | None = None
        if expected:
            telemetry.register_source(runtime.name)

    @property
    def name(self) -> str:
        """The runtime's source name (`containerd` or `docker`)."""
        return self.runtime.name

    @property
    def up(self) -> bool:
        """Whether the latest refresh reached the runtime (the snapshot may be older)."""
        return self._up

    def age(self) -> float | None:
        """Seconds since the snapshot was built; None before the runtime first answered."""
        return None if self._last_ok is None else self._now() - self._last_ok

    async def refresh(self) -> None:
        """Lists the runtime once and rebuilds the snapshot; never raises for a runtime fault."""
        try:
            async with asyncio.timeout(self._timeout):
                refs = await self.runtime.list_containers()
            records = await self._extract_all(refs)
        except (RuntimeUnavailable, TimeoutError) as exc:
            self._failed(str(exc) or "timed out")
            return
        if not self.found:
            self.found = True
            self._log.info("found container runtime %s at %s", self.name, self.runtime.endpoint)
        self._telemetry.source_ok(self.name)
        self.snapshot = self._composer.compose(records)
        self._up, self._last_ok = True, self._now()
        self._audit.containers(self.name, len(self.snapshot.by_id))
        self._publish_age()

    async def _extract_all(self, refs: Sequence[ContainerRef]) -> list[Record]:
        records: list[Record] = []
        env = self._selectors.env.enabled
        for ref in refs:
            if not ref.running:
                continue  # a stopped container (or sandbox) is never read: it labels nothing
            known = self._records.get(ref.id)
            if known is not None and known.revision == ref.revision:
                records.append(known)
                continue
            async with asyncio.timeout(self._timeout):
                spec = await self.runtime.container_spec(ref, env=env)
            if spec is None:
                continue  # removed between the listing and this request
            if not spec.valid:
                self._audit.invalid(self.name, "malformed_spec")
            records.append(extract(ref, spec, self._selectors, self._audit))
        self._records = {record.id: record for record in records}
        return records

    def _failed(self, reason: str) -> None:
        """Reports the runtime down; the last good snapshot stays (see the class doc)."""
        self._up = False
        if self.found:
            self._telemetry.source_failed(self.name, reason)
            self._publish_age()
        else:
            self._log.debug("container runtime %s not answering yet: %s", self.name, reason)

    def _publish_age(self) -> None:
        age = self.age()
        if age is not None:
            self._telemetry.set_gauge(AGE_GAUGE, age, processor=self._processor, runtime=self.name)
