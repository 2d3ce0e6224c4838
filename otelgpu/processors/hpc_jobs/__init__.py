"""`hpc_jobs` processor: HPC job IDs on GPU series, from dcgm-exporter's job-mapping files."""

from otelgpu.processors.hpc_jobs.factory import factory

__all__ = ["factory"]
