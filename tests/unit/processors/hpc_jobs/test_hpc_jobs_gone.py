"""With `multiple_jobs: duplicate` each job on a GPU has a copy of its series, an identity of
its own: when the job leaves the GPU the processor says that copy is gone (a resource with no
metrics), so exporters end its series at once instead of serving it beside the live ones
(a sum over the GPU counted it twice until it expired)."""

from __future__ import annotations

from pathlib import Path

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch
from tests.unit.processors.hpc_jobs.test_hpc_jobs import GPU0, _rm, batch, started


def _gpu0(out: Batch) -> list[tuple[object, object, bool]]:
    """(job, identity, has metrics) of GPU 0's device resources."""
    return [
        (rm.resource.get("hpc.job"), rm.identity, bool(rm.metrics))
        for rm in out
        if rm.resource[semconv.HW_ID] == GPU0 and semconv.PROCESS_PID not in rm.resource
    ]


async def test_a_job_that_leaves_a_shared_gpu_has_its_copy_closed(
    telemetry: SelfTelemetry, tmp_path: Path
) -> None:
    (tmp_path / "0").write_text("10\n20\n")
    processor = await started(telemetry, tmp_path, multiple_jobs="duplicate")
    ended = EndedSeries()
    try:
        ended.closing(processor.process(batch()))
        (tmp_path / "0").write_text("20\n")
        await processor.refresh()
        out = processor.process(batch())
        closed = ended.closing(out)
    finally:
        await processor.shutdown()
    assert _gpu0(out) == [
        ("20", (GPU0, "hpc.job", "20"), True),
        ("10", (GPU0, "hpc.job", "10"), False),  # the gone marker of job 10's copy
    ]
    assert [rm.resource["hpc.job"] for rm in closed] == ["10"]  # its series end downstream


async def test_the_copies_of_every_gpu_are_remembered_each_closed_when_its_job_leaves(
    telemetry: SelfTelemetry, tmp_path: Path
) -> None:
    (tmp_path / "0").write_text("10\n")
    (tmp_path / "1").write_text("20\n")
    processor = await started(telemetry, tmp_path, multiple_jobs="duplicate")
    try:
        processor.process(batch())
        processor.process(batch())  # both GPUs known: neither forgets the other
        (tmp_path / "0").write_text("11\n")
        (tmp_path / "1").write_text("21\n")
        await processor.refresh()
        out = processor.process(batch())
    finally:
        await processor.shutdown()
    gone = sorted(rm.resource["hpc.job"] for rm in out if not rm.metrics)
    assert gone == ["10", "20"]


async def test_the_last_jobs_leaving_close_their_copies_and_the_unlabelled_series_comes_back(
    telemetry: SelfTelemetry, tmp_path: Path
) -> None:
    (tmp_path / "0").write_text("10\n20\n")
    processor = await started(telemetry, tmp_path, multiple_jobs="duplicate")
    try:
        processor.process(batch())
        (tmp_path / "0").unlink()  # the epilog removed the file: no job anywhere
        await processor.refresh()
        out = processor.process(batch())
        again = processor.process(batch())
    finally:
        await processor.shutdown()
    assert _gpu0(out) == [
        (None, GPU0, True),
        ("10", (GPU0, "hpc.job", "10"), False),
        ("20", (GPU0, "hpc.job", "20"), False),
    ]
    assert _gpu0(again) == [(None, GPU0, True)]  # each marker sent once


async def test_a_job_starting_ends_the_unlabelled_series_in_duplicate_mode(
    telemetry: SelfTelemetry, tmp_path: Path
) -> None:
    """The GPU's series without a job and its job's copy are two series: the first ends when
    the job starts (else sums over the GPU count it twice until it expires)."""
    processor = await started(telemetry, tmp_path, multiple_jobs="duplicate")
    try:
        processor.process(batch())
        (tmp_path / "0").write_text("10\n")
        await processor.refresh()
        out = processor.process(batch())
    finally:
        await processor.shutdown()
    assert _gpu0(out) == [
        ("10", (GPU0, "hpc.job", "10"), True),
        (None, GPU0, False),
    ]


async def test_joined_jobs_keep_the_gpus_identity_and_send_no_marker(
    telemetry: SelfTelemetry, tmp_path: Path
) -> None:
    """`join` (the default): the job is a property of the GPU's one series, which goes on."""
    (tmp_path / "0").write_text("10\n20\n")
    processor = await started(telemetry, tmp_path)
    try:
        processor.process(batch())
        (tmp_path / "0").write_text("20\n")
        await processor.refresh()
        out = processor.process(batch())
    finally:
        await processor.shutdown()
    assert _gpu0(out) == [("20", GPU0, True)]


async def test_past_4096_devices_the_copies_remembered_are_forgotten_not_grown(
    telemetry: SelfTelemetry, tmp_path: Path
) -> None:
    """A node has tens of GPUs: a table of more than 4096 devices holding copies is a flood,
    so it starts over, and the copies it forgot expire downstream instead of being ended."""
    devices = 4097
    for n in range(devices):
        (tmp_path / str(n)).write_text(f"job-{n}\n")
    resources = tuple(
        _rm({semconv.HW_ID: f"GPU-{n}", semconv.GPU_INDEX: str(n)}, f"GPU-{n}")
        for n in range(devices)
    )
    processor = await started(telemetry, tmp_path, multiple_jobs="duplicate")
    try:
        processor.process(resources)
        for n in range(devices):
            (tmp_path / str(n)).unlink()
        await processor.refresh()
        markers = [rm for rm in processor.process(resources) if not rm.metrics]
    finally:
        await processor.shutdown()
    assert [rm.resource["hpc.job"] for rm in markers] == ["job-4096"]  # the last one only
