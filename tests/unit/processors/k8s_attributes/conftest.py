"""Fixtures the k8s_attributes processor tests share: a scripted kubelet and a started processor."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    UUID_B,
    FakePodResources,
    allocatable,
    make_processor,
)


@pytest.fixture
def client() -> FakePodResources:
    """The kubelet's pod-resources answers: two allocatable GPUs, no pod yet."""
    fake = FakePodResources()
    fake.devices = allocatable({GPU: [UUID_A, UUID_B]})
    return fake


@pytest.fixture
async def started(
    telemetry: SelfTelemetry, client: FakePodResources, clock: FakeClock
) -> AsyncIterator[K8sAttributesProcessor]:
    """A processor on `client`, started, its first refresh done; shut down after the test."""
    processor = make_processor(telemetry, client, clock)
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)  # the first refresh runs at once
    yield processor
    await processor.shutdown()
