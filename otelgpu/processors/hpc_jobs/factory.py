"""Factory of the `hpc_jobs` processor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.processors.hpc_jobs.config import HpcJobsProcessorConfig

if TYPE_CHECKING:
    from otelgpu.processors.hpc_jobs.processor import HpcJobsProcessor


def _create(settings: Settings, config: HpcJobsProcessorConfig) -> HpcJobsProcessor:
    from otelgpu.processors.hpc_jobs.processor import HpcJobsProcessor  # loaded when used

    return HpcJobsProcessor(settings, config)


factory = Factory(
    type="hpc_jobs",
    kind=Kind.PROCESSOR,
    stability=Stability.ALPHA,
    config_type=HpcJobsProcessorConfig,
    create=_create,
    description="labels GPU series with HPC job IDs from dcgm-exporter style job-mapping files",
)
