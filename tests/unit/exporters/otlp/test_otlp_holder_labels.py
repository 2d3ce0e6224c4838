"""A holder's business labels (what container_env's include lists added to its resource) go on
its `nvidia.gpu.allocation` points too: Prometheus' OTLP endpoint keeps point attributes only,
and a cost split by team joins the allocation series (which bills) on `hw.id`."""

from __future__ import annotations

from typing import Any

from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.unit.exporters.otlp.batches import INTERVAL, T0, gpu_resource, holders
from tests.unit.exporters.otlp.batches import gauge as _gauge
from tests.unit.exporters.otlp.test_otlp_ended import _requests, points

GPU = gpu_resource(0)[semconv.HW_ID]
BUSINESS = {
    "container.env.TEAM": "vision",
    "container.label.cost-center": "cc-42",
    "k8s.pod.label.team": "vision",
    "k8s.pod.annotation.owner": "ana",
}
OWNERS = {"k8s.deployment.name": "trainer", "kueue.queue.name": "research"}


def _labelled(batch: Batch, **extra: str) -> Batch:
    """`batch` with container_env's attributes on each resource."""
    return tuple(
        ResourceMetrics(
            resource={**rm.resource, **BUSINESS, **OWNERS, **extra},
            metrics=rm.metrics,
            identity=rm.identity,
        )
        for rm in batch
    )


def _device(time: int) -> ResourceMetrics:
    metric = _gauge("hw.gpu.utilization", time, ({semconv.HW_ID: GPU}, 0.5))
    resource = {**gpu_resource(0), semconv.K8S_POD_NAME: "a", **BUSINESS}
    return ResourceMetrics(resource=resource, metrics=(metric,), identity=GPU)


def _attributes(request: Any, name: str) -> list[dict[str, Any]]:
    return [attrs for metric, attrs, _ in points(request) if metric == name]


async def test_allocation_points_carry_the_holders_business_labels() -> None:
    (request,) = await _requests((*_labelled(holders(T0, "a")), _device(T0)))
    (allocation,) = _attributes(request, semconv.GPU_ALLOCATION)
    assert allocation == {semconv.HW_ID: GPU, semconv.K8S_POD_NAME: "a", **BUSINESS}
    # the device's own readings keep their point attributes: the allocation series joins them
    assert _attributes(request, "hw.gpu.utilization") == [{semconv.HW_ID: GPU}]


async def test_a_holder_whose_business_labels_changed_has_its_old_series_closed() -> None:
    """A pod recreated under the same name with another team: the old team's allocation series
    ends at once (it would bill the old team for minutes)."""
    _, second = await _requests(
        _labelled(holders(T0, "a")),
        _labelled(holders(T0 + INTERVAL, "a"), **{"container.env.TEAM": "speech"}),
    )
    allocation = [p for p in points(second) if p[0] == semconv.GPU_ALLOCATION]
    teams = sorted((p[1]["container.env.TEAM"], str(p[2])) for p in allocation)
    assert teams == [("speech", "1.0"), ("vision", f"closed at {T0 + INTERVAL}")]


async def test_a_holder_without_business_labels_is_sent_as_before() -> None:
    (request,) = await _requests(holders(T0, "a"))
    assert _attributes(request, semconv.GPU_ALLOCATION) == [
        {semconv.HW_ID: GPU, semconv.K8S_POD_NAME: "a"}
    ]


async def test_a_holders_dra_claim_goes_on_its_allocation_point() -> None:
    claim = {
        semconv.GPU_RESOURCECLAIM_NAME: "train-gpu",
        semconv.GPU_RESOURCECLAIM_NAMESPACE: "ml",
    }
    (request,) = await _requests(_labelled(holders(T0, "a"), **claim))
    (allocation,) = _attributes(request, semconv.GPU_ALLOCATION)
    assert {key: allocation.get(key) for key in claim} == claim
