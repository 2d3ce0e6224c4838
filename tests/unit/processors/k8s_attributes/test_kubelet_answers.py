"""How the processor takes the kubelet's answers: large ones indexed off the event loop, the
device-ID forms logged once per change, and one early refresh per unknown device with the
devices already asked about remembered (up to 4096)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.k8s_attributes import processor as processor_module
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.processors.k8s_attributes.snapshot import Snapshot, build_snapshot
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    FakePodResources,
    container,
    gpu,
    make_processor,
    pod,
)

FORMS = "pod-resources device IDs seen"


@pytest.mark.parametrize(("pods", "off_loop"), [(200, False), (201, True)])
async def test_answers_of_more_than_200_pods_are_indexed_off_the_event_loop(
    started: K8sAttributesProcessor,
    client: FakePodResources,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    pods: int,
    off_loop: bool,
) -> None:
    threads: list[threading.Thread] = []

    def recorded(*args: Any, **kwargs: Any) -> Snapshot:
        threads.append(threading.current_thread())
        return build_snapshot(*args, **kwargs)

    monkeypatch.setattr(processor_module, "build_snapshot", recorded)
    client.set(*(pod("ml", f"p{i}", container("c", {GPU: [UUID_A]})) for i in range(pods)))
    await clock.advance(10)
    assert len(threads) == 1
    assert (threads[0] is not threading.main_thread()) == off_loop
    assert started.snapshot is not None and started.snapshot.pods == pods


async def test_new_answers_with_the_same_id_forms_log_them_once(
    started: K8sAttributesProcessor,
    client: FakePodResources,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="otelgpu.processor.k8s_attributes")
    for name in ("a", "b", "c"):  # other pods each time, each holding a GPU by its UUID
        client.set(pod("ml", name, container("c", {GPU: [UUID_A]})))
        await clock.advance(10)
    lines = [r.getMessage() for r in caplog.records if FORMS in r.getMessage()]
    assert lines == [f"{FORMS} (device_id_type=auto): gpu-uuid=1"]


def _unknown(i: int) -> ResourceMetrics:
    return gpu(f"GPU-unknown-{i}", 10 + i, points=1)


async def test_the_last_4096_unknown_devices_are_each_asked_about_once(
    telemetry: SelfTelemetry, client: FakePodResources, clock: FakeClock
) -> None:
    """An unknown device asks for one early refresh; the devices asked about are remembered
    so that it is asked once, up to 4096 of them: the next new one starts the memory afresh
    (bounding it when device IDs churn), after which a device asked about before asks again."""
    processor = make_processor(telemetry, client, clock, refresh_interval="10m")
    await processor.start(FakeHost(telemetry))
    await clock.advance(2)

    async def asks(*devices: int) -> int:
        before = client.list_calls
        processor.process(tuple(_unknown(i) for i in devices))
        await clock.advance(1)  # an early refresh, when asked for, runs within a second
        return client.list_calls - before

    assert await asks(*range(4096)) == 1
    assert await asks(0, 4094, 4095) == 0  # all 4096 remembered
    assert await asks(4096) == 1  # the 4097th: the memory starts afresh with it
    assert await asks(0) == 1  # forgotten, so asked about again
    await processor.shutdown()
