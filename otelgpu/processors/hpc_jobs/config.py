"""Configuration of the `hpc_jobs` processor."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from otelgpu.config.types import PositiveDuration, StrictModel


class HpcJobsProcessorConfig(StrictModel):
    """`processors::hpc_jobs`.

    job_mapping_dir: the folder a scheduler prolog/epilog writes, in dcgm-exporter's
      `--hpc-job-mapping-dir` layout: a file per GPU named `<gpu index>` (or
      `<gpu index>.<GPU instance ID>` for a MIG instance), one job ID per line. Empty (the
      default, as dcgm-exporter's flag) means none: the processor adds nothing and says so.
    refresh_interval: how often the folder is looked at (1s); a file is read again only
      when its modification time or size changed.
    attribute: the attribute that carries the job ID(s) (`hpc.job`; dcgm naming renders
      it `hpc_job`, as dcgm-exporter does).
    multiple_jobs: a GPU with several jobs: `join` (default; one series, the job IDs sorted
      and comma-separated) or `duplicate` (one copy of the GPU's series per job, as
      dcgm-exporter renders it; sums over GPUs then count that GPU once per job).
    max_jobs_per_gpu: job IDs kept per file (64); more are dropped and counted.
    """

    job_mapping_dir: str = ""
    refresh_interval: PositiveDuration = 1.0
    attribute: str = Field(default="hpc.job", min_length=1)
    multiple_jobs: Literal["join", "duplicate"] = "join"
    max_jobs_per_gpu: int = Field(default=64, gt=0)

    @field_validator("job_mapping_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if value and not value.startswith("/"):
            raise ValueError(f'must be an absolute path (got "{value}")')
        return value
