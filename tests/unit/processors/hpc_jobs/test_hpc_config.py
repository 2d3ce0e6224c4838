"""The hpc_jobs processor's config: the documented defaults, and the errors (key, position,
message) a bad value gives."""

from __future__ import annotations

import pytest

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.errors import ConfigError
from otelgpu.config.schema import AgentConfig
from otelgpu.processors.hpc_jobs.config import HpcJobsProcessorConfig
from tests.unit.config.pipelines import through, validated

PIPELINE = through("hpc_jobs")


def _validate(text: str) -> AgentConfig:
    return validated(PIPELINE, text)


def _config(text: str) -> HpcJobsProcessorConfig:
    config = _validate(text).components[Kind.PROCESSOR][ComponentID.parse("hpc_jobs")]
    assert isinstance(config, HpcJobsProcessorConfig)
    return config


def test_the_defaults_are_the_documented_ones() -> None:
    config = _config("processors: {hpc_jobs: {job_mapping_dir: /run/hpc-jobs}}")
    assert config.job_mapping_dir == "/run/hpc-jobs"
    assert config.refresh_interval == 1.0
    assert config.attribute == "hpc.job"
    assert config.multiple_jobs == "join"
    assert config.max_jobs_per_gpu == 64
    assert HpcJobsProcessorConfig().job_mapping_dir == ""  # none: the processor adds nothing


def test_one_job_per_gpu_may_be_kept() -> None:
    text = "processors: {hpc_jobs: {job_mapping_dir: /run/hpc-jobs, max_jobs_per_gpu: 1}}"
    assert _config(text).max_jobs_per_gpu == 1


def test_bad_values_are_refused_naming_each_key_at_its_position() -> None:
    text = """processors:
  hpc_jobs:
    job_mapping_dir: run/hpc-jobs
    attribute: ""
    max_jobs_per_gpu: 0
"""
    with pytest.raises(ConfigError) as info:
        _validate(text)
    assert str(info.value).splitlines() == [
        "f.yaml:3:22: processors::hpc_jobs::job_mapping_dir: must be an absolute path "
        '(got "run/hpc-jobs")',
        "f.yaml:4:16: processors::hpc_jobs::attribute: string should have at least 1 character",
        "f.yaml:5:23: processors::hpc_jobs::max_jobs_per_gpu: must be greater than 0",
    ]
