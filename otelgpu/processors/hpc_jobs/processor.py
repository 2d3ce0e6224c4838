"""The `hpc_jobs` processor: which HPC job(s) hold each GPU, from job-mapping files.

A background task looks at the folder every `refresh_interval` (off the event loop) and
installs a GPU → jobs map; `process` only looks GPUs up in it (no I/O, never raises). A GPU
series gets the job ID(s) of the file named after its NVML index; a MIG instance's series,
those of `<parent index>.<GPU instance ID>` only (as dcgm-exporter keys them). Process series
are left alone: their Slurm job comes from their own cgroup (nvml `processes: true`).
Nothing that goes wrong with the folder stops the agent: it is counted and logged once per
change, and the last good map is replaced by what can be read now.

With `multiple_jobs: duplicate` each job's copy of a device's series is an identity of its own
(the device's identity, the attribute, the job), even when the job is alone on it. When a job
leaves the device (or the first one arrives), the identity it no longer sends under gets one
"gone" marker (a resource without metrics, `ResourceMetrics`): exporters end its series at
once instead of serving them beside the live ones until they expire. `join` keeps the device's
identity whatever its jobs: its one series goes on with a new label, as when a pod changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping
from dataclasses import replace

from otelgpu.component.clock import Clock, RealClock
from otelgpu.component.component import Host, Settings
from otelgpu.component.tasks import cancel_and_wait
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, Identity, ResourceMetrics, with_resource
from otelgpu.processors.hpc_jobs.config import HpcJobsProcessorConfig
from otelgpu.processors.hpc_jobs.job_files import GpuKey, JobFiles, Reading

ERRORS = "otelgpu_hpc_jobs_errors_total"
_SENT_MAX = 4096  # devices whose job copies are remembered (a node has tens)


class HpcJobsProcessor:
    """Adds the job ID(s) of each GPU or MIG instance to its series (see the config for how
    several jobs on one GPU are rendered)."""

    def __init__(
        self, settings: Settings, config: HpcJobsProcessorConfig, *, clock: Clock | None = None
    ) -> None:
        self._settings = settings
        self._config = config
        self._clock = clock or RealClock()
        self._id = str(settings.id)
        self._files = JobFiles(config.job_mapping_dir, config.max_jobs_per_gpu)
        self._jobs: Mapping[GpuKey, tuple[str, ...]] = {}
        self._problems: tuple[str, ...] = ()
        self._task: asyncio.Task[None] | None = None
        self.refreshes = 0  # completed looks at the folder (tests wait on it)
        # duplicate: a device's identity → the copies it was last sent as, when not itself
        self._copies: dict[Hashable, dict[Identity, ResourceMetrics]] = {}

    async def start(self, host: Host) -> None:
        if self._task is not None:
            return
        if not self._config.job_mapping_dir:
            self._settings.logger.warning("job_mapping_dir is not set: no job IDs are added")
            return
        await self.refresh()  # the first export already carries the jobs
        self._task = asyncio.create_task(self._run(), name=f"refresh:{self._id}")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def refresh(self) -> None:
        """One look at the folder; never raises."""
        try:
            reading = await asyncio.to_thread(self._files.read)
        except Exception as exc:  # a bug or an OS surprise must not end the loop
            reading = Reading()
            reading.failed("internal", f"{type(exc).__name__}: {exc}")
        self._install(reading)
        self.refreshes += 1

    async def _run(self) -> None:
        while True:
            await self._clock.sleep(self._config.refresh_interval)
            await self.refresh()

    def _install(self, reading: Reading) -> None:
        for reason, n in reading.errors.items():
            self._settings.telemetry.count(
                ERRORS,
                n,
                processor=self._id,
                reason=reason,
            )
        problems = tuple(reading.problems)
        if problems != self._problems:  # say it once per change, not every second
            self._problems = problems
            if problems:
                self._settings.logger.warning("HPC job files: %s", "; ".join(problems[:10]))
            else:
                self._settings.logger.info("HPC job files: %s read", self._config.job_mapping_dir)
        self._jobs = reading.jobs

    # --- the hot path ------------------------------------------------------------------

    def process(self, batch: Batch) -> Batch:
        jobs_by_gpu = self._jobs
        if self._config.multiple_jobs == "duplicate":
            if not jobs_by_gpu and not self._copies:
                return batch
            return self._duplicated(batch, jobs_by_gpu)
        if not jobs_by_gpu:
            return batch
        out: list[ResourceMetrics] = []
        attribute = self._config.attribute
        for rm in batch:
            jobs = _jobs_of(rm, jobs_by_gpu, attribute)
            if not jobs:
                out.append(rm)
            else:
                out.append(with_resource(rm, {attribute: ",".join(sorted(jobs))}))
        return tuple(out)

    def _duplicated(
        self, batch: Batch, jobs_by_gpu: Mapping[GpuKey, tuple[str, ...]]
    ) -> tuple[ResourceMetrics, ...]:
        """One copy of a device's series per job, and a gone marker for each identity the
        device was sent under last time and not now."""
        out: list[ResourceMetrics] = []
        attribute = self._config.attribute
        copies_of = self._copies
        for rm in batch:
            jobs = _jobs_of(rm, jobs_by_gpu, attribute)
            copies = _copies(rm, jobs, attribute) if jobs else [rm]
            out.extend(copies)
            identity = rm.identity
            if identity is None:  # (the attributes are the identity: they tell copies apart)
                continue
            before = copies_of.get(identity)
            if before is None and not jobs:
                continue  # sent as itself, as last time: the usual case, nothing to remember
            sent = {copy.identity: copy for copy in copies}
            last = before if before is not None else {identity: rm}
            out.extend(replace(copy, metrics=()) for key, copy in last.items() if key not in sent)
            if jobs and rm.metrics:
                if before is None and len(copies_of) >= _SENT_MAX:
                    copies_of.clear()
                copies_of[identity] = sent
            else:  # itself again, or gone: nothing left to end later
                copies_of.pop(identity, None)
        return tuple(out)


def _jobs_of(
    rm: ResourceMetrics, jobs_by_gpu: Mapping[GpuKey, tuple[str, ...]], attribute: str
) -> tuple[str, ...]:
    resource = rm.resource
    if (
        semconv.HW_ID not in resource
        or semconv.PROCESS_PID in resource
        or attribute in resource  # set upstream: never overwritten
    ):
        return ()
    index = resource.get(semconv.GPU_INDEX)
    if index is None:
        return ()
    if semconv.HW_PARENT not in resource:
        return jobs_by_gpu.get((str(index), ""), ())
    gi = resource.get(semconv.MIG_GPU_INSTANCE_ID)
    if gi is None:  # a MIG instance that does not say which: never its GPU's jobs
        return ()
    return jobs_by_gpu.get((str(index), str(gi)), ())


def _copies(rm: ResourceMetrics, jobs: tuple[str, ...], attribute: str) -> list[ResourceMetrics]:
    """One copy of the device's series per job, each its own series (identity + job)."""
    out = []
    for job in sorted(jobs):
        copy = with_resource(rm, {attribute: job})
        if rm.identity is not None:  # (None: the attributes are the identity, and they differ)
            copy = replace(copy, identity=(rm.identity, attribute, job))
        out.append(copy)
    return out
