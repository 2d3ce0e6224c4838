"""A device's allocation series end when its last holder leaves: the processor sends the
marker that empties them (an identity with no metrics), once."""

from __future__ import annotations

from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.fakes import FakeClock
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    FakePodResources,
    container,
    gpu,
    pod,
)


async def test_the_last_holder_leaving_sends_the_marker_that_empties_its_series_once(
    started: K8sAttributesProcessor, client: FakePodResources, clock: FakeClock
) -> None:
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    await clock.advance(10)
    started.process((gpu(UUID_A),))
    client.set()  # the pod is gone
    await clock.advance(10)
    out = started.process((gpu(UUID_A),))
    assert [(rm.identity, rm.metrics) for rm in out[1:]] == [((semconv.GPU_ALLOCATION, UUID_A), ())]
    assert semconv.K8S_POD_NAME not in out[0].resource
    again = started.process((gpu(UUID_A),))
    assert len(again) == 1  # once
