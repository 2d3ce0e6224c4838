"""A runtime outage never changes labels: the last good snapshot stays, its age exposed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.audit import Audit
from otelgpu.processors.container_env.keys import KeySelector
from otelgpu.processors.container_env.records import Selectors
from otelgpu.processors.container_env.runtime import ContainerRef
from otelgpu.processors.container_env.source import AGE_GAUGE, RuntimeSource
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import counter

LOG = logging.getLogger("test.container_env")


class Clock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _selector(section: str, *keys: str) -> KeySelector:
    return KeySelector(
        section, KeyFilter(include=list(keys)), allow_secret_like_keys=False, max_value_length=64
    )


def _source(
    rt: FakeRuntime,
    telemetry: SelfTelemetry,
    clock: Clock,
    timeout: float = 5.0,
    expected: bool = True,
) -> RuntimeSource:
    selectors = Selectors(
        env=_selector("env", "TEAM"),
        labels=_selector("labels"),
        pod_labels=_selector("pod_labels", "team"),
        annotations=_selector("annotations"),
        owners=True,
    )
    return RuntimeSource(
        rt,
        expected=expected,
        selectors=selectors,
        audit=Audit("container_env", telemetry, LOG),
        telemetry=telemetry,
        logger=LOG,
        max_attributes=32,
        timeout=timeout,
        processor="container_env/a",
        clock=clock,
    )


def _node(team: str = "ml") -> FakeRuntime:
    rt = FakeRuntime()
    rt.sandbox("sb", "ml", "train-0", labels={"team": "vision"})
    rt.workload("c", "ml", "train-0", "trainer", sandbox_id="sb", env={"TEAM": team})
    return rt


def _team(source: RuntimeSource) -> object:
    assert source.snapshot is not None
    match = source.snapshot.by_workload.get(("ml", "train-0", "trainer"))
    return None if match is None else match.attributes.get("container.env.TEAM")


def _age(telemetry: SelfTelemetry) -> float:
    return counter(telemetry, AGE_GAUGE, processor="container_env/a", runtime="containerd")


async def test_outage_keeps_the_last_good_snapshot_and_reports_down(
    telemetry: SelfTelemetry,
) -> None:
    clock, rt = Clock(), _node()
    source = _source(rt, telemetry, clock)
    await source.refresh()
    kept = source.snapshot
    assert source.up and _team(source) == "ml" and _age(telemetry) == 0.0

    rt.up = False
    clock.now += 7.0
    await source.refresh()
    assert not source.up
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 0
    assert source.snapshot is kept and _team(source) == "ml"
    assert source.age() == 7.0 and _age(telemetry) == 7.0

    clock.now += 5.0
    await source.refresh()
    assert source.snapshot is kept and _age(telemetry) == 12.0

    rt.up = True  # back, with the same truth: the same labels, a fresh age
    clock.now += 1.0
    await source.refresh()
    assert source.up and _team(source) == "ml" and _age(telemetry) == 0.0
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1


async def test_labels_change_only_when_the_runtime_answers_otherwise(
    telemetry: SelfTelemetry,
) -> None:
    clock, rt = Clock(), _node()
    source = _source(rt, telemetry, clock)
    await source.refresh()
    rt.up = False
    rt.stop("c")  # the truth changes while nobody can see it
    await source.refresh()
    assert _team(source) == "ml"
    rt.up = True
    await source.refresh()
    assert _team(source) is None  # the runtime said so


class SlowRuntime(FakeRuntime):
    """Answers the listing only when `release` is set (a runtime hung on a busy node)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.release.set()

    async def list_containers(self) -> Sequence[ContainerRef]:
        await self.release.wait()
        return await super().list_containers()


async def test_a_slow_runtime_is_down_and_its_labels_stay(telemetry: SelfTelemetry) -> None:
    clock, rt = Clock(), SlowRuntime()
    rt.sandbox("sb", "ml", "train-0")
    rt.workload("c", "ml", "train-0", "trainer", sandbox_id="sb", env={"TEAM": "ml"})
    source = _source(rt, telemetry, clock, timeout=0.01)
    await source.refresh()
    rt.release.clear()
    await source.refresh()  # gives up after `timeout`
    assert not source.up and _team(source) == "ml"
    assert telemetry.sources["containerd"].last_error == "timed out"


async def test_a_runtime_is_not_up_until_it_has_answered(telemetry: SelfTelemetry) -> None:
    rt = _node()
    source = _source(rt, telemetry, Clock())
    assert "containerd" in telemetry.sources  # expected: shown down from the start
    assert not source.up  # nothing asked yet: not up, whatever the runtime would say
    assert source.snapshot is None and source.age() is None
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 0

    await source.refresh()
    assert source.up and _team(source) == "ml"
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1


async def test_no_snapshot_and_no_age_before_the_first_answer(
    telemetry: SelfTelemetry,
) -> None:
    rt = _node()
    rt.up = False
    source = _source(rt, telemetry, Clock())
    await source.refresh()
    assert source.snapshot is None and source.age() is None
    assert all(m.name != AGE_GAUGE for m in telemetry.collect().metrics)


async def test_a_probed_runtime_that_never_answered_is_not_a_source_and_says_so_in_debug(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """`runtime: auto` probes each runtime: one that is not there is no outage, only a debug
    line, and no source of the agent's."""
    caplog.set_level(logging.DEBUG, logger=LOG.name)
    rt = _node()
    rt.up = False
    source = _source(rt, telemetry, Clock(), expected=False)
    await source.refresh()
    assert "containerd" not in telemetry.sources
    assert [r.getMessage() for r in caplog.records if r.name == LOG.name] == [
        "container runtime containerd not answering yet: connection refused"
    ]
