"""Factory of the `hpc_jobs` processor."""

from __future__ import annotations

from otelgpu.component import Kind, Settings, Stability
from otelgpu.processors.hpc_jobs.config import HpcJobsProcessorConfig
from otelgpu.processors.hpc_jobs.processor import HpcJobsProcessor
from otelgpu.registry import Factory


def _create(settings: Settings, config: HpcJobsProcessorConfig) -> HpcJobsProcessor:
    return HpcJobsProcessor(settings, config)


factory = Factory(
    type="hpc_jobs",
    kind=Kind.PROCESSOR,
    stability=Stability.ALPHA,
    config_type=HpcJobsProcessorConfig,
    create=_create,
    description="labels GPU series with HPC job IDs from dcgm-exporter style job-mapping files",
)
