"""A GPU process belongs to the container it runs in, never to its GPU's allocation, and a
process outside its GPU's allocation (a process series, or a process only listed on its GPU's
own resource) is counted and logged once. Start waits for a runtime's first answer, or for its
timeout."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.container_env.runtime import ContainerRef
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import gpu, make_processor, one

SQUATTER = "a" * 64
TRAINER = "b" * 64
OUTSIDE = "otelgpu_gpu_processes_outside_allocation"
HOLDERS = frozenset({("ml", "train-0", "trainer")})
UNKNOWN = "f" * 64  # a container the runtime does not know


def _runtime() -> FakeRuntime:
    rt = FakeRuntime()
    rt.sandbox("s1" * 32, "ml", "train-0")
    rt.workload(TRAINER, "ml", "train-0", "trainer", sandbox_id="s1" * 32, env={"TEAM": "ml"})
    rt.sandbox("s2" * 32, "other", "squatter")
    rt.workload(SQUATTER, "other", "squatter", "main", sandbox_id="s2" * 32, env={"TEAM": "other"})
    return rt


async def _started(telemetry: SelfTelemetry, clock: FakeClock):
    proc = make_processor(telemetry, [(_runtime(), True)], clock, env={"include": ["TEAM"]})
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    return proc


def _process(pid: int, container_id: str, holders: object, **resource: str) -> ResourceMetrics:
    rm = gpu(
        1,
        **{semconv.PROCESS_PID: pid, semconv.CONTAINER_ID: container_id},  # type: ignore[arg-type]
        **resource,
    )
    return replace(rm, notes={notes.GPU_HOLDERS: holders}) if holders is not None else rm


def _gauge(telemetry: SelfTelemetry) -> float | None:
    values = [p.value for m in telemetry.collect().metrics if m.name == OUTSIDE for p in m.points]
    return values[0] if values else None


def _listed(*processes: object, holders: object = HOLDERS) -> ResourceMetrics:
    """A GPU's own resource with the processes the receiver listed on it (no process series)."""
    return replace(gpu(1), notes={notes.GPU_HOLDERS: holders, notes.GPU_PROCESSES: processes})


async def test_a_squatter_process_is_labelled_by_its_own_pod(telemetry, clock, caplog):
    proc = await _started(telemetry, clock)
    # As k8s_attributes leaves it now: the node, and a note of who holds the GPU.
    squatter = _process(4242, SQUATTER, HOLDERS, **{semconv.K8S_NODE_NAME: "n"})
    with caplog.at_level(logging.WARNING):
        resource = one(proc.process((squatter,)))
    assert resource[semconv.K8S_NAMESPACE_NAME] == "other"
    assert resource[semconv.K8S_POD_NAME] == "squatter"
    assert resource[semconv.K8S_CONTAINER_NAME] == "main"
    assert resource["container.env.TEAM"] == "other"
    assert _gauge(telemetry) == 1
    assert "process 4242 of other/squatter/main uses GPU" in caplog.text
    assert "allocated to ml/train-0/trainer" in caplog.text
    await proc.shutdown()


async def test_names_an_earlier_processor_guessed_are_replaced_for_a_process(telemetry, clock):
    """The old k8s_attributes put the GPU holder's names on every process series."""
    proc = await _started(telemetry, clock)
    guessed = {semconv.K8S_NAMESPACE_NAME: "ml", semconv.K8S_POD_NAME: "train-0"}
    resource = one(proc.process((_process(4242, SQUATTER, None, **guessed),)))
    assert (resource[semconv.K8S_NAMESPACE_NAME], resource[semconv.K8S_POD_NAME]) == (
        "other",
        "squatter",
    )
    assert resource["container.env.TEAM"] == "other"
    await proc.shutdown()


async def test_the_holders_own_process_is_not_counted(telemetry, clock, caplog):
    proc = await _started(telemetry, clock)
    with caplog.at_level(logging.WARNING):
        resource = one(proc.process((_process(7, TRAINER, HOLDERS),)))
    assert resource[semconv.K8S_POD_NAME] == "train-0"
    assert _gauge(telemetry) == 0
    assert "uses GPU" not in caplog.text
    await proc.shutdown()


@pytest.mark.parametrize(
    ("container_id", "holders", "expected"),
    [
        ("", HOLDERS, 1),  # a host process on an allocated GPU
        ("", frozenset(), 1),  # a host process on a GPU nobody holds
        (TRAINER, frozenset(), 1),  # a pod's process on a GPU nobody holds
        ("f" * 64, HOLDERS, 0),  # a container the runtime does not know (yet): cannot tell
    ],
)
async def test_outside_allocation_cases(telemetry, clock, container_id, holders, expected):
    proc = await _started(telemetry, clock)
    proc.process((_process(9, container_id, holders),))
    assert _gauge(telemetry) == expected
    await proc.shutdown()


async def test_the_warning_is_logged_once_per_process(telemetry, clock, caplog):
    proc = await _started(telemetry, clock)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            proc.process((_process(4242, SQUATTER, HOLDERS),))
    assert caplog.text.count("process 4242 of") == 1
    await proc.shutdown()


async def test_processes_listed_on_a_gpu_are_checked_against_its_allocation(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    proc = await _started(telemetry, clock)
    listed = ((4242, SQUATTER), (7, TRAINER), (9, ""), (5, UNKNOWN), ("malformed",), "x")
    with caplog.at_level(logging.WARNING):
        proc.process((_listed(*listed),))
    assert _gauge(telemetry) == 2  # another pod's process and the host's; not the holder's
    assert "process 4242 of other/squatter/main uses GPU GPU-0, which the kubelet" in caplog.text
    assert "process 9 of the host uses GPU GPU-0, which the kubelet allocated to " in caplog.text
    assert "process 7 " not in caplog.text and "process 5 " not in caplog.text
    proc.process((_listed((4242, SQUATTER), holders=frozenset()),))
    assert _gauge(telemetry) == 1
    await proc.shutdown()


async def test_each_squatter_is_logged_once_whatever_the_order(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    proc = await _started(telemetry, clock)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            proc.process((_process(4242, SQUATTER, HOLDERS),))
            proc.process((_process(9, "", HOLDERS),))
    assert caplog.text.count("process 4242 of other/squatter/main uses GPU GPU-0") == 1
    assert caplog.text.count("process 9 of the host uses GPU GPU-0") == 1
    await proc.shutdown()


async def test_no_note_no_gauge(telemetry, clock):
    """Without k8s_attributes nothing is known about the allocation: nothing is claimed."""
    proc = await _started(telemetry, clock)
    proc.process((_process(4242, SQUATTER, None),))
    assert _gauge(telemetry) is None
    await proc.shutdown()


class _Silent(FakeRuntime):
    """A runtime that never answers: every request runs into the processor's timeout."""

    async def list_containers(self) -> Sequence[ContainerRef]:
        self.list_calls += 1
        await asyncio.Event().wait()
        return []


async def test_start_waits_past_a_runtimes_timeout_for_its_first_refresh(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    proc = make_processor(telemetry, [(_Silent(), False)], clock, timeout="50ms")
    with caplog.at_level(logging.WARNING):
        await proc.start(FakeHost(telemetry))
        # The first refresh has ended (the runtime timed out) before start returns.
        assert "no container runtime answered yet" in caplog.text
        assert "container_env refresh" in {task.get_name() for task in asyncio.all_tasks()}
    await proc.shutdown()


async def test_no_warning_when_a_runtime_answers(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        proc = await _started(telemetry, clock)
        await clock.advance(10.0)
    assert "no container runtime answered" not in caplog.text
    await proc.shutdown()


async def test_start_waits_for_the_first_refresh(telemetry, clock):
    """The first export waits for a runtime's first answer: before it, every series would
    start unlabelled (then a labelled twin would appear beside it)."""
    proc = make_processor(telemetry, [(_runtime(), True)], clock, env={"include": ["TEAM"]})
    await proc.start(FakeHost(telemetry))  # no clock advance: the answer is already in
    resource = one(proc.process((_process(7, TRAINER, None),)))
    assert resource["container.env.TEAM"] == "ml"
    await proc.shutdown()
