"""The container_env processor at the corners mutation testing showed no test held
(docs/dev/mutation.md): the squatters found among the processes listed on a GPU's own
resource, what their warning says and how often, the spacing and memory of early refreshes,
how long `start` waits, and the section a refused key is counted under."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.container_env.audit import REFUSED
from otelgpu.processors.container_env.processor import OUTSIDE_ALLOCATION, ContainerEnvProcessor
from otelgpu.processors.container_env.runtime import ContainerRef
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import by_id, counter, gpu, make_processor

SQUATTER = "a" * 64
TRAINER = "b" * 64
UNKNOWN = "f" * 64
HOLDERS = frozenset({("ml", "train-0", "trainer")})


def _runtime() -> FakeRuntime:
    rt = FakeRuntime()
    rt.sandbox("s1" * 32, "ml", "train-0", labels={"api_token": "t"})
    rt.workload(TRAINER, "ml", "train-0", "trainer", sandbox_id="s1" * 32)
    rt.sandbox("s2" * 32, "other", "squatter")
    rt.workload(SQUATTER, "other", "squatter", "main", sandbox_id="s2" * 32)
    return rt


async def _started(
    telemetry: SelfTelemetry, clock: FakeClock, rt: FakeRuntime | None = None, **options: object
) -> ContainerEnvProcessor:
    proc = make_processor(telemetry, [(rt or _runtime(), True)], clock, **options)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    return proc


def _listed(*processes: object, holders: object = HOLDERS) -> ResourceMetrics:
    """A GPU's own resource with the processes the receiver listed on it (no process series)."""
    return replace(gpu(1), notes={notes.GPU_HOLDERS: holders, notes.GPU_PROCESSES: processes})


def _process(pid: int, container_id: str) -> ResourceMetrics:
    rm = gpu(1, **{semconv.PROCESS_PID: pid, semconv.CONTAINER_ID: container_id})  # type: ignore[arg-type]
    return replace(rm, notes={notes.GPU_HOLDERS: HOLDERS})


def _gauge(telemetry: SelfTelemetry) -> float:
    return counter(telemetry, OUTSIDE_ALLOCATION)


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
            proc.process((_process(4242, SQUATTER),))
            proc.process((_process(9, ""),))
    assert caplog.text.count("process 4242 of other/squatter/main uses GPU GPU-0") == 1
    assert caplog.text.count("process 9 of the host uses GPU GPU-0") == 1
    await proc.shutdown()


async def test_early_refreshes_come_no_closer_than_a_second(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _runtime()
    proc = await _started(telemetry, clock, rt)
    assert rt.list_calls == 1
    proc.process((by_id(UNKNOWN),))
    await clock.advance(0.5)
    assert rt.list_calls == 1
    await clock.advance(0.5)
    assert rt.list_calls == 2
    await proc.shutdown()


async def test_a_container_that_stays_unknown_asks_once_among_others(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _runtime()
    proc = await _started(telemetry, clock, rt)
    proc.process((by_id("c" * 64),))
    await clock.advance(1.0)
    proc.process((by_id("d" * 64),))
    await clock.advance(1.0)
    assert rt.list_calls == 3
    proc.process((by_id("c" * 64),))  # asked already, whatever came between
    await clock.advance(1.0)
    assert rt.list_calls == 3
    await proc.shutdown()


async def test_the_unknown_containers_remembered_are_bounded(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _runtime()
    proc = await _started(telemetry, clock, rt)
    unknown = [f"{i:064x}" for i in range(4097)]
    proc.process(tuple(by_id(cid) for cid in unknown))
    await clock.advance(1.0)
    assert rt.list_calls == 2
    # Past 4096 of them the processor forgets which it asked for: the first asks again.
    proc.process((by_id(unknown[0]),))
    await clock.advance(1.0)
    assert rt.list_calls == 3
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


async def test_refused_keys_are_counted_under_their_section(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = _runtime()
    rt.sandbox("s3" * 32, "ml", "eval", annotations={"db_password": "p"})
    rt.workload("e" * 64, "ml", "eval", "main", labels={"secret_key": "k"}, env={"API_KEY": "v"})
    sections = ("env", "labels", "pod_labels", "annotations")
    keys = (["API_KEY"], ["secret_key"], ["api_token"], ["db_password"])
    options = {section: {"include": k} for section, k in zip(sections, keys, strict=True)}
    proc = await _started(telemetry, clock, rt, **options)
    for section in sections:
        assert counter(telemetry, REFUSED, section=section) == 1, section
    await proc.shutdown()
