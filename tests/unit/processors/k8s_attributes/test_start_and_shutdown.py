"""The processor's start and shutdown: its node name, its own kubelet client, the wait for the
first answer, its refresh task."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.pod_resources import PodAllocation
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.k8s_attributes.fakes import (
    UUID_A,
    FakePodResources,
    gpu,
    make_processor,
    series,
)

NO_NODE = "K8S_NODE_NAME is not set: no k8s.node.name"


async def _started(
    telemetry: SelfTelemetry,
    client: FakePodResources,
    clock: FakeClock,
    *,
    environ: Mapping[str, str] | None = None,
    **config: object,
) -> K8sAttributesProcessor:
    processor = make_processor(telemetry, client, clock, environ=environ, **config)
    await processor.start(FakeHost(telemetry))
    return processor


async def test_a_missing_node_name_is_said_once_at_start_and_labels_no_node(
    telemetry: SelfTelemetry,
    client: FakePodResources,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        processor = await _started(telemetry, client, clock, environ={})
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert NO_NODE in said
    (out,) = processor.process((gpu(UUID_A),))
    assert "k8s.node.name" not in out.resource
    await processor.shutdown()


async def test_a_node_name_from_the_environment_is_not_said_missing(
    telemetry: SelfTelemetry,
    client: FakePodResources,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        processor = await _started(telemetry, client, clock)
    assert NO_NODE not in caplog.text
    (out,) = processor.process((gpu(UUID_A),))
    assert out.resource["k8s.node.name"] == "node-a"
    await processor.shutdown()


async def test_without_a_client_given_it_asks_the_configured_socket(
    telemetry: SelfTelemetry, clock: FakeClock, tmp_path: Path
) -> None:
    """The processor makes its own pod-resources client on the configured socket: where
    there is none, the refresh fails as a missing socket (not as an internal error)."""
    config = K8sAttributesProcessorConfig.model_validate(
        {"pod_resources_socket": str(tmp_path / "kubelet.sock")}
    )
    settings = make_settings("k8s_attributes", Kind.PROCESSOR, telemetry)
    processor = K8sAttributesProcessor(settings, config, clock=clock, environ={})
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)
    assert series(telemetry, "otelgpu_pod_resources_errors_total", code="SOCKET_MISSING") == 1
    assert not series(telemetry, "otelgpu_pod_resources_errors_total", code="INTERNAL")
    await processor.shutdown()


class _SilentKubelet(FakePodResources):
    """A kubelet that accepts the request and never answers."""

    async def list(self) -> tuple[PodAllocation, ...]:
        self.list_calls += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_start_returns_only_once_a_silent_kubelet_has_been_given_up_on(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """The first export waits for the first refresh's end, however it ends: start outwaits
    the refresh's own bound (twice the timeout, plus 1 s), so a kubelet that never answers has been
    counted as failed (and the batch goes out unlabelled) by the time start returns."""
    client = _SilentKubelet()
    processor = await _started(telemetry, client, clock, timeout="50ms")
    assert processor.refresher is not None and processor.refresher.first_attempt.is_set()
    assert series(telemetry, "otelgpu_pod_resources_errors_total", code="DEADLINE_EXCEEDED") == 1
    await processor.shutdown()


async def test_the_refresh_task_is_named_for_the_processor(
    telemetry: SelfTelemetry, client: FakePodResources, clock: FakeClock
) -> None:
    processor = await _started(telemetry, client, clock)
    names = {task.get_name() for task in asyncio.all_tasks()}
    assert "refresh:k8s_attributes" in names
    await processor.shutdown()


async def test_shutdown_stops_the_refreshes(
    telemetry: SelfTelemetry, client: FakePodResources, clock: FakeClock
) -> None:
    processor = await _started(telemetry, client, clock)
    await clock.advance(10)
    await processor.shutdown()
    calls = client.list_calls
    await clock.advance(60)
    assert client.list_calls == calls
    assert client.closed == 1
    assert not any(t.get_name() == "refresh:k8s_attributes" for t in asyncio.all_tasks())
