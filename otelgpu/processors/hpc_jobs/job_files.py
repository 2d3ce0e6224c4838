"""dcgm-exporter's HPC job-mapping folder, read again only where it changed.

A scheduler prolog writes one file per GPU the job got, named `<gpu index>` or, for a MIG
instance, `<gpu index>.<GPU instance ID>`, holding the job ID(s), one per line; the epilog
empties or removes it. Other names are not ours (a prolog's temporary files) and are skipped.
Blocking file I/O: called from a worker thread.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

GpuKey = tuple[str, str]  # (GPU index, GPU instance ID or "" for a whole GPU)

_NAME = re.compile(r"^(?P<gpu>\d+)(?:\.(?P<gi>\d+))?$")
MAX_JOB_ID = 256  # characters of one job ID kept (a label value, not a document)

# Why a read went wrong (the errors counter's `reason`).
MISSING_DIR = "missing_dir"
UNREADABLE_DIR = "unreadable_dir"
UNREADABLE_FILE = "unreadable_file"
TOO_MANY_JOBS = "too_many_jobs"


@dataclass(slots=True)
class Reading:
    """One look at the folder: the jobs per GPU, and what went wrong (reason → count, and one
    line per problem naming the file)."""

    jobs: dict[GpuKey, tuple[str, ...]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def failed(self, reason: str, problem: str) -> None:
        self.errors[reason] = self.errors.get(reason, 0) + 1
        self.problems.append(problem)


class JobFiles:
    """The folder's files, each re-read only when its (mtime, size) changed."""

    def __init__(self, directory: str, max_jobs: int) -> None:
        self._dir = directory
        self._max_jobs = max_jobs
        self._seen: dict[str, tuple[tuple[int, int], tuple[str, ...], bool]] = {}

    def read(self) -> Reading:
        """The jobs of every GPU named in the folder now."""
        reading = Reading()
        try:
            entries = list(os.scandir(self._dir))
        except FileNotFoundError:
            self._seen.clear()
            reading.failed(MISSING_DIR, f"{self._dir} does not exist")
            return reading
        except OSError as exc:
            self._seen.clear()
            reading.failed(UNREADABLE_DIR, f"{self._dir}: {exc.strerror or exc}")
            return reading
        seen: dict[str, tuple[tuple[int, int], tuple[str, ...], bool]] = {}
        for entry in entries:
            name = _NAME.match(entry.name)
            if name is None:
                continue
            got = self._file(entry, reading)
            if got is None:
                continue
            seen[entry.name] = got
            _, jobs, truncated = got
            if truncated:
                reading.failed(TOO_MANY_JOBS, f"{entry.path}: more than {self._max_jobs} jobs")
            if jobs:
                reading.jobs[(name["gpu"], name["gi"] or "")] = jobs
        self._seen = seen
        return reading

    def _file(
        self, entry: os.DirEntry[str], reading: Reading
    ) -> tuple[tuple[int, int], tuple[str, ...], bool] | None:
        try:
            if not entry.is_file():
                return None
            info = entry.stat()
            stamp = (info.st_mtime_ns, info.st_size)
            cached = self._seen.get(entry.name)
            if cached is not None and cached[0] == stamp:
                return cached
            with open(entry.path, "rb") as handle:
                text = handle.read().decode("utf-8", errors="replace")
        except OSError as exc:  # removed between listing and reading, or not readable
            if not isinstance(exc, FileNotFoundError):
                reading.failed(UNREADABLE_FILE, f"{entry.path}: {exc.strerror or exc}")
            return None
        jobs = parse_jobs(text)
        return stamp, jobs[: self._max_jobs], len(jobs) > self._max_jobs


def parse_jobs(text: str) -> tuple[str, ...]:
    """The job IDs of one file: one per line, trimmed, blank lines and repeats dropped, in the
    order written. (dcgm-exporter keeps blank lines as empty job IDs; an empty label value
    helps nobody.)"""
    jobs: dict[str, None] = {}
    for line in text.splitlines():
        job = line.strip()[:MAX_JOB_ID]
        if job:
            jobs[job] = None
    return tuple(jobs)
