"""R1 and R2 with a real containerd: killed mid-run, and not there yet when the agent starts.

R1 drives refreshes by hand (the processor's loop runs on a clock that never moves), so
"within one refresh" is checked exactly: one refresh after the kill, one after the return.
R2 runs the processor's own loop on the real clock (200ms refresh) to show probing goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import point_count
from otelgpu.processors.container_env import factory
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.factory import runtimes_for
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.peers.cri_records import Pod, create_container, create_sandbox, stop_pod
from tests.peers.runtime import Containerd
from tests.unit.processors.container_env.helpers import by_id, by_workload, counter, gpu

pytestmark = pytest.mark.integration

UNMATCHED = "otelgpu_enrichment_unmatched_points_total"
AGE = "otelgpu_container_env_snapshot_age_seconds"


@pytest.fixture
def running(containerd: Containerd) -> Containerd:
    """The module's containerd, started again if a test left it down."""
    if containerd.proc is None:
        containerd.start()
    return containerd


def _config(containerd: Containerd, **options: Any) -> ContainerEnvProcessorConfig:
    return ContainerEnvProcessorConfig.model_validate(
        {
            "containerd": {"socket": str(containerd.socket)},
            "env": {"include": ["TEAM"]},
            "pod_labels": {"include": ["team"]},
            **options,
        }
    )


def _labelled(rm_resource: Any) -> bool:
    return rm_resource.get("container.env.TEAM") == "ml"


async def test_r1_containerd_killed_mid_run(running: Containerd, telemetry: SelfTelemetry) -> None:
    """A source outage never changes labels: while containerd is down the last
    good snapshot keeps labelling (its age exposed), `otelgpu_source_up` reads 0 after one
    refresh, and labels change only when containerd answers with a different truth."""
    pod = Pod("ml", "r1-pod", labels={"team": "vision"})
    create_sandbox(running.socket, pod)
    cid = create_container(running.socket, pod, "trainer", env={"TEAM": "ml"})
    settings = make_settings("container_env", Kind.PROCESSOR, telemetry)
    config = _config(running, runtime="containerd")
    proc = ContainerEnvProcessor(settings, config, runtimes_for, clock=FakeClock())
    await proc.start(FakeHost(telemetry))
    await proc.refresh()
    batch = (by_id(cid, points=3), by_workload("ml", "r1-pod", "trainer", points=4), gpu(5))

    def cycle() -> list[dict[str, object]]:
        out = proc.process(batch)
        assert point_count(out) == point_count(batch) == 12  # every point flows, every cycle
        return [dict(rm.resource) for rm in out]

    labelled = cycle()
    assert [_labelled(r) for r in labelled] == [True, True, False]
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
    assert _age(telemetry) is not None

    running.kill()  # the tasks' shims live on, as on a node whose containerd crashed
    await proc.refresh()  # one refresh after the kill
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 0
    for _ in range(3):
        assert cycle() == labelled  # the same labels, not dropped
    assert counter(telemetry, UNMATCHED) == 0  # every held GPU found its labels
    first_age = _age(telemetry)
    await proc.refresh()  # still down: the snapshot is older now, and still used
    assert (_age(telemetry) or 0.0) >= (first_age or 0.0) > 0.0
    assert cycle() == labelled

    running.start()
    await proc.refresh()  # one refresh after it returns: the same truth, the same labels
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
    assert cycle() == labelled
    assert labelled[0]["k8s.pod.label.team"] == "vision"

    stop_pod(running.socket, pod, "trainer")  # a different truth: the pod is gone
    await proc.refresh()
    assert [_labelled(r) for r in cycle()] == [False, False, False]
    await proc.shutdown()


def _age(telemetry: SelfTelemetry) -> float | None:
    """The containerd snapshot's age gauge; None while it has no series."""
    for metric in telemetry.collect().metrics:
        if metric.name == AGE:
            for point in metric.points:
                if point.attributes.get("runtime") == "containerd":
                    return float(point.value)
    return None


async def _wait_until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_r2_runtime_absent_at_start(
    running: Containerd, telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    pod = Pod("ml", "r2-pod", labels={"team": "vision"})
    create_sandbox(running.socket, pod)
    cid = create_container(running.socket, pod, "trainer", env={"TEAM": "ml"})
    running.kill()
    running.socket.unlink()  # no runtime at all yet, as at node boot
    config = _config(
        running,
        runtime="auto",
        docker={"socket": str(running.root / "no-docker.sock")},
        refresh_interval="200ms",
    )
    proc = factory.create(make_settings("container_env", Kind.PROCESSOR, telemetry), config)
    await proc.start(FakeHost(telemetry))
    try:
        rm = by_id(cid)
        await _wait_until(lambda: "no container runtime answered yet" in caplog.text)
        assert proc.process((rm,)) == (rm,)  # flows, unlabelled, counted
        assert counter(telemetry, UNMATCHED, reason="runtime_down") == 2
        assert telemetry.sources == {}  # nothing configured is down: auto is still probing

        running.start()
        await _wait_until(lambda: _labelled(proc.process((rm,))[0].resource))
        assert "found container runtime containerd at" in caplog.text
        assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
        assert "docker" not in telemetry.sources
    finally:
        with contextlib.suppress(Exception):
            await proc.shutdown()
