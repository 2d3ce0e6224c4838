"""The hpc_jobs processor where its job-mapping folder is not simply readable: a path that is no
folder, a job file that cannot be opened, a path the OS refuses outright, a file at exactly the
job limit; what is labelled, counted and logged each time, and the count of completed looks."""

from __future__ import annotations

import errno
import logging
import os
from dataclasses import replace

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.processors.hpc_jobs.config import HpcJobsProcessorConfig
from otelgpu.processors.hpc_jobs.processor import HpcJobsProcessor
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.hpc_jobs.test_hpc_jobs import ERRORS, GPU0, GPU1, batch, jobs_of
from tests.unit.processors.k8s_attributes.fakes import series


async def started(telemetry: SelfTelemetry, folder: str, **config: object) -> HpcJobsProcessor:
    settings = make_settings("hpc_jobs", Kind.PROCESSOR, telemetry)
    values = {"job_mapping_dir": folder, **config}
    processor = HpcJobsProcessor(
        settings, HpcJobsProcessorConfig.model_validate(values), clock=FakeClock()
    )
    await processor.start(FakeHost(telemetry))
    return processor


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_job_mapping_path_that_is_no_folder_is_counted_and_named_in_the_log(
    telemetry, tmp_path, caplog
):
    not_a_folder = tmp_path / "jobs"
    not_a_folder.write_text("0\n")
    with caplog.at_level(logging.WARNING):
        processor = await started(telemetry, str(not_a_folder))
    try:
        assert series(telemetry, ERRORS, reason="unreadable_dir") == 1
        assert warnings(caplog) == [f"HPC job files: {not_a_folder}: {os.strerror(errno.ENOTDIR)}"]
        assert processor.process(batch()) == batch()
    finally:
        await processor.shutdown()


async def test_a_job_file_that_cannot_be_opened_is_counted_and_the_other_gpus_keep_their_jobs(
    telemetry, tmp_path, caplog
):
    os.symlink("0", tmp_path / "0")  # a link to itself: opening it fails (ELOOP), even as root
    (tmp_path / "1").write_text("4712\n")
    with caplog.at_level(logging.WARNING):
        processor = await started(telemetry, str(tmp_path))
    try:
        assert series(telemetry, ERRORS, reason="unreadable_file") == 1
        assert series(telemetry, ERRORS, reason="internal") is None
        assert warnings(caplog) == [f"HPC job files: {tmp_path / '0'}: {os.strerror(errno.ELOOP)}"]
        out = processor.process(batch())
        assert jobs_of(out, GPU0) == [None]
        assert jobs_of(out, GPU1) == ["4712"]
    finally:
        await processor.shutdown()


async def test_a_path_the_os_refuses_is_counted_as_internal_and_logged_with_the_error(
    telemetry, tmp_path, caplog
):
    with caplog.at_level(logging.WARNING):
        processor = await started(telemetry, f"{tmp_path}/jobs\0")  # a NUL byte from YAML's "\0"
    try:
        assert series(telemetry, ERRORS, reason="internal") == 1
        assert warnings(caplog) == ["HPC job files: ValueError: embedded null byte"]
        assert processor.process(batch()) == batch()
    finally:
        await processor.shutdown()


async def test_a_file_with_exactly_the_job_limit_is_neither_cut_nor_counted(
    telemetry, tmp_path, caplog
):
    (tmp_path / "0").write_text("20\n10\n")
    with caplog.at_level(logging.WARNING):
        processor = await started(telemetry, str(tmp_path), max_jobs_per_gpu=2)
    try:
        assert jobs_of(processor.process(batch()), GPU0) == ["10,20"]
        assert series(telemetry, ERRORS) is None
        assert warnings(caplog) == []
    finally:
        await processor.shutdown()


async def test_each_completed_look_at_the_folder_is_counted_for_those_waiting_on_it(
    telemetry, tmp_path
):
    processor = await started(telemetry, str(tmp_path))
    try:
        assert processor.refreshes == 1  # the look start makes before the first export
        await processor.refresh()
        assert processor.refreshes == 2
    finally:
        await processor.shutdown()


async def test_a_mig_instance_that_does_not_say_which_gets_none_of_its_gpus_jobs(
    telemetry, tmp_path
):
    """A MIG series is labelled from `<index>.<GI>` only: one without its GPU instance ID is
    never given the whole GPU's jobs, which may run on its sibling instances."""
    (tmp_path / "1").write_text("4711\n")
    (tmp_path / "1.2").write_text("4712\n")
    processor = await started(telemetry, str(tmp_path))
    try:
        _, gpu1, mig, _ = batch()
        anonymous = replace(
            mig,
            resource={k: v for k, v in mig.resource.items() if k != semconv.MIG_GPU_INSTANCE_ID},
        )
        out = processor.process((gpu1, mig, anonymous))
        assert [rm.resource.get("hpc.job") for rm in out] == ["4711", "4712", None]
    finally:
        await processor.shutdown()
