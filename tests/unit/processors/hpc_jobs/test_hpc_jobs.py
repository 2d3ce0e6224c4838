"""The hpc_jobs processor over real job-mapping folders (dcgm-exporter's layout) in tmp dirs,
including folders and files that cannot be read: what is labelled, counted and logged."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from dataclasses import replace
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.labels import dcgm_label
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.hpc_jobs.config import HpcJobsProcessorConfig
from otelgpu.processors.hpc_jobs.job_files import JobFiles, parse_jobs
from otelgpu.processors.hpc_jobs.processor import HpcJobsProcessor
from otelgpu.service.builtins import builtin_registry
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.k8s_attributes.fakes import series

ERRORS = "otelgpu_hpc_jobs_errors_total"
GPU0, GPU1, MIG = "GPU-0000", "GPU-1111", "MIG-2222"


def _rm(resource: dict[str, str | int], identity: object) -> ResourceMetrics:
    point = NumberDataPoint(attributes={}, time_unix_nano=1, value=1.0)
    metric = Metric(
        name="hw.gpu.utilization", unit="1", description="", kind=MetricKind.GAUGE, points=(point,)
    )
    return ResourceMetrics(resource=resource, metrics=(metric,), identity=identity)


def batch() -> tuple[ResourceMetrics, ...]:
    gpu0 = {semconv.HW_ID: GPU0, semconv.GPU_INDEX: "0"}
    gpu1 = {semconv.HW_ID: GPU1, semconv.GPU_INDEX: "1"}
    mig = {
        semconv.HW_ID: MIG,
        semconv.GPU_INDEX: "1",
        semconv.HW_PARENT: GPU1,
        semconv.MIG_GPU_INSTANCE_ID: "2",
    }
    process = {**gpu0, semconv.PROCESS_PID: 42}
    return (_rm(gpu0, GPU0), _rm(gpu1, GPU1), _rm(mig, MIG), _rm(process, (GPU0, 42)))


def jobs_of(out: tuple[ResourceMetrics, ...], uuid: str) -> list[object]:
    return [
        rm.resource.get("hpc.job")
        for rm in out
        if rm.resource[semconv.HW_ID] == uuid and semconv.PROCESS_PID not in rm.resource
    ]


async def started(
    telemetry: SelfTelemetry, folder: Path | str, clock: FakeClock | None = None, **config: object
) -> HpcJobsProcessor:
    settings = make_settings("hpc_jobs", Kind.PROCESSOR, telemetry)
    values = {"job_mapping_dir": str(folder), **config}
    processor = HpcJobsProcessor(
        settings, HpcJobsProcessorConfig.model_validate(values), clock=clock or FakeClock()
    )
    await processor.start(FakeHost(telemetry))
    return processor


def test_parse_jobs_one_per_line():
    assert parse_jobs("123\n\n 456 \n123\n") == ("123", "456")
    assert parse_jobs("") == ()


def test_a_job_id_is_kept_to_256_characters():
    assert parse_jobs("a" * 256 + "\n" + "b" * 300) == ("a" * 256, "b" * 256)


def test_bytes_that_are_no_utf8_are_kept_as_replacement_characters(tmp_path):
    (tmp_path / "0").write_bytes(b"job-\xff\n")
    assert JobFiles(str(tmp_path), max_jobs=8).read().jobs == {("0", ""): ("job-\ufffd",)}


async def test_gpu_and_mig_files_label_their_series(telemetry, tmp_path):
    (tmp_path / "0").write_text("4711\n")
    (tmp_path / "1.2").write_text("4712\n")  # MIG instance GI 2 of GPU 1
    (tmp_path / "README").write_text("not a GPU\n")
    (tmp_path / "1.tmp").write_text("a prolog's temporary file\n")
    processor = await started(telemetry, tmp_path)
    try:
        out = processor.process(batch())
        assert jobs_of(out, GPU0) == ["4711"]
        assert jobs_of(out, GPU1) == [None]  # its MIG instance's job is not the GPU's
        assert jobs_of(out, MIG) == ["4712"]
        (process,) = [rm for rm in out if semconv.PROCESS_PID in rm.resource]
        assert "hpc.job" not in process.resource  # its own cgroup says which job it is
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


async def test_several_jobs_join_by_default_or_duplicate_like_dcgm_exporter(telemetry, tmp_path):
    (tmp_path / "0").write_text("20\n10\n")
    joined = await started(telemetry, tmp_path)
    duplicated = await started(telemetry, tmp_path, multiple_jobs="duplicate")
    try:
        assert jobs_of(joined.process(batch()), GPU0) == ["10,20"]
        copies = [rm for rm in duplicated.process(batch()) if rm.resource[semconv.HW_ID] == GPU0]
        copies = [rm for rm in copies if semconv.PROCESS_PID not in rm.resource and rm.metrics]
        assert [rm.resource["hpc.job"] for rm in copies] == ["10", "20"]
        assert len({rm.identity for rm in copies}) == 2  # two series, not one overwritten
    finally:
        await joined.shutdown()
        await duplicated.shutdown()


async def test_a_file_is_read_again_only_when_it_changed(telemetry, tmp_path):
    job_file = tmp_path / "0"
    job_file.write_text("111\n")
    processor = await started(telemetry, tmp_path)
    try:
        stamp = job_file.stat().st_mtime_ns
        job_file.write_text("222\n")  # same size; the mtime put back: not read again
        os.utime(job_file, ns=(stamp, stamp))
        await processor.refresh()
        assert jobs_of(processor.process(batch()), GPU0) == ["111"]
        job_file.write_text("3333\n")  # a new job: size (and mtime) change
        await processor.refresh()
        assert jobs_of(processor.process(batch()), GPU0) == ["3333"]
        job_file.unlink()  # the epilog removes it
        await processor.refresh()
        assert jobs_of(processor.process(batch()), GPU0) == [None]
    finally:
        await processor.shutdown()


async def test_a_missing_folder_is_counted_and_logged_once_then_recovers(
    telemetry, tmp_path, caplog
):
    folder = tmp_path / "jobs"
    with caplog.at_level(logging.WARNING):
        processor = await started(telemetry, folder)
        await processor.refresh()
    try:
        assert series(telemetry, ERRORS, reason="missing_dir") == 2  # counted each look
        assert caplog.text.count("does not exist") == 1  # logged once
        assert processor.process(batch()) == batch()  # nothing to add, nothing broken
        folder.mkdir()
        (folder / "0").write_text("77\n")
        await processor.refresh()
        assert jobs_of(processor.process(batch()), GPU0) == ["77"]
    finally:
        await processor.shutdown()


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


@pytest.mark.parametrize("written", [4, 10])
def test_too_many_jobs_are_cut_and_counted(tmp_path, written):
    (tmp_path / "0").write_text("".join(f"{n}\n" for n in range(written)))
    reading = JobFiles(str(tmp_path), max_jobs=3).read()
    assert reading.jobs == {("0", ""): ("0", "1", "2")}
    assert reading.errors == {"too_many_jobs": 1}
    assert "more than 3 jobs" in reading.problems[0]


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


def test_folders_and_fifos_named_like_gpus_are_skipped(tmp_path):
    (tmp_path / "0").mkdir()
    os.mkfifo(tmp_path / "1")  # opening it would block the reader
    assert JobFiles(str(tmp_path), max_jobs=8).read().jobs == {}


async def test_the_folder_is_looked_at_every_refresh_interval(telemetry, tmp_path):
    clock = FakeClock()
    processor = await started(telemetry, tmp_path, clock, refresh_interval="60s")
    looked_at: list[float] = []
    read = processor._files.read

    def noted() -> object:
        looked_at.append(clock.now)
        return read()

    processor._files.read = noted  # type: ignore[method-assign]
    try:
        (tmp_path / "0").write_text("9\n")
        await clock.advance(60)
        for _ in range(1000):  # the read runs in a worker thread: wait for it, bounded
            if processor.refreshes > 1:
                break
            await asyncio.sleep(0.01)
        assert jobs_of(processor.process(batch()), GPU0) == ["9"]
        assert looked_at[:1] == [clock.now]  # the interval on the clock it was given
    finally:
        await processor.shutdown()


async def test_shutdown_ends_the_refresh_loop(telemetry, tmp_path):
    processor = await started(telemetry, tmp_path)
    loops = [t for t in asyncio.all_tasks() if t.get_name() == "refresh:hpc_jobs"]
    assert len(loops) == 1  # named for the processor it refreshes
    await processor.shutdown()
    assert loops[0].done()


async def test_a_changed_set_of_problems_is_logged_once_ten_at_most_and_recovery_too(
    telemetry, tmp_path, caplog
):
    (tmp_path / "jobs").mkdir()
    for n in range(12):
        os.symlink(str(n), tmp_path / "jobs" / str(n))  # links to themselves: unreadable
    with caplog.at_level(logging.INFO, logger="otelgpu"):
        processor = await started(telemetry, tmp_path / "jobs")
        await processor.refresh()  # the same problems: not logged again
        for n in range(12):
            (tmp_path / "jobs" / str(n)).unlink()
        await processor.refresh()
    await processor.shutdown()
    lines = [r.getMessage() for r in caplog.records if "HPC job files" in r.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0].startswith("HPC job files: ") and lines[0].count("; ") == 9
    assert lines[1] == f"HPC job files: {tmp_path / 'jobs'} read"


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


def test_registered_and_configured_by_type():
    factory = builtin_registry().get(Kind.PROCESSOR, "hpc_jobs")
    config = factory.config_type.model_validate({"job_mapping_dir": "/run/hpc-jobs"})
    assert config.attribute == "hpc.job"
    with pytest.raises(ValueError, match="absolute"):
        factory.config_type.model_validate({"job_mapping_dir": "jobs"})


async def test_without_a_folder_it_adds_nothing_and_says_so(telemetry, caplog):
    settings = make_settings("hpc_jobs", Kind.PROCESSOR, telemetry)
    processor = HpcJobsProcessor(settings, HpcJobsProcessorConfig())
    with caplog.at_level(logging.WARNING):
        await processor.start(FakeHost(telemetry))
    assert "job_mapping_dir is not set" in caplog.text
    assert processor.process(batch()) == batch()
    await processor.shutdown()


def test_dcgm_naming_renders_the_attribute_as_dcgm_exporters_label():
    assert dcgm_label("hpc.job", False) == ("hpc_job", False)
