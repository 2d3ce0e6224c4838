"""k8s_attributes posts every pod-resources answer (an unchanged one too) to the service's pod
listing, under its socket's path, and withdraws it when a request fails: what kubelet_stats
checks its summary against is never older than the last answer, nor a guess while the kubelet
is down."""

from __future__ import annotations

import random
from dataclasses import replace

from otelgpu.component.component import Kind
from otelgpu.component.pod_listing import PodListings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.pod_resources import PodResourcesError
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.k8s_attributes.fakes import GPU, UUID_A, FakePodResources, container, pod

SOCKET = "/run/kubelet/pod-resources/kubelet.sock"


def processor(
    telemetry: SelfTelemetry, client: FakePodResources, clock: FakeClock, listings: PodListings
) -> K8sAttributesProcessor:
    settings = replace(
        make_settings("k8s_attributes", Kind.PROCESSOR, telemetry), pod_listings=listings
    )
    config = K8sAttributesProcessorConfig.model_validate({"pod_resources_socket": SOCKET})
    return K8sAttributesProcessor(
        settings, config, client=client, clock=clock, environ={}, rng=random.Random(7)
    )


async def test_every_answer_is_posted_and_a_failure_withdraws_the_listing(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    listings = PodListings()
    client = FakePodResources()
    client.set(
        pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})),
        pod("web", "api-7", container("api")),  # no GPU: listed all the same
    )
    k8s = processor(telemetry, client, clock, listings)
    await k8s.start(FakeHost(telemetry))
    await clock.advance(0)
    mark = listings.began()
    assert mark is not None and mark.source == SOCKET
    mark = listings.ended(mark)  # a read between two answers
    assert listings.listed_throughout(mark) is None
    await clock.advance(10)  # the same answer again: posted, though nothing is rebuilt
    assert k8s.refresher is not None and k8s.refresher.rebuilds == 1
    assert listings.listed_throughout(mark) == {("ml", "train-0"), ("web", "api-7")}
    client.error = PodResourcesError("UNAVAILABLE", "kubelet restarting")
    await clock.advance(10)
    assert listings.began() is None
    assert listings.listed_throughout(mark) is None
    client.error = None
    await clock.advance(10)
    assert listings.began() is not None
    assert listings.lost(mark)  # a read from before the failure is never judged
    assert listings.listed_throughout(mark) is None
    await k8s.shutdown()
