"""A DRA claim's name and namespace, from a pod-resources answer through k8s_attributes to
`/metrics`: on the holder's allocation series in both namings (dcgm-exporter's
`dra_claim_name` / `dra_claim_namespace` in dcgm naming), never on a device-plugin holder's,
and not on the device's own series."""

from __future__ import annotations

import re

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus import dcgm
from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import SharedGpuSeries
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, ResourceMetrics
from otelgpu.processors.k8s_attributes._proto import podresources_pb2 as pb
from otelgpu.processors.k8s_attributes.pod_resources import parse_list
from tests.fakes import FakeClock, FakeHost
from tests.peers.kubelet import claim, claim_device, container, pod
from tests.unit.exporters.prometheus.batches import gpu, gpu_metrics
from tests.unit.exporters.prometheus.translators import make_translator
from tests.unit.processors.k8s_attributes.fakes import FakePodResources, make_processor

ALLOCATION = "nvidia_gpu_allocation_ratio"
OTEL = ("nvidia_gpu_resourceclaim_name", "nvidia_gpu_resourceclaim_namespace")
DCGM = ("dra_claim_name", "dra_claim_namespace")
DEVICE_SERIES = {"otel": "hw_power_watts", "dcgm": "DCGM_FI_DEV_POWER_USAGE"}
POD = {"otel": "k8s_pod_name", "dcgm": "pod"}


def answer(*pods: pb.PodResources) -> FakePodResources:
    """A client answering what a kubelet with these pods sends (parsed by the real parser)."""
    client = FakePodResources()
    raw = pb.ListPodResourcesResponse(pod_resources=list(pods)).SerializeToString()
    client.set(*parse_list(raw))
    return client


def node_batch() -> Batch:
    """Three GPUs as the nvml receiver sends them: minors 0, 1, 2 (DRA names GPUs by minor)."""
    return tuple(
        ResourceMetrics(
            resource=gpu(i, **{semconv.GPU_MINOR: str(i)}),
            metrics=gpu_metrics(),
            scope="otelgpu.nvml",
            identity=gpu(i)[semconv.HW_ID],
        )
        for i in range(3)
    )


async def enriched(client: FakePodResources, data: Batch) -> Batch:
    telemetry = SelfTelemetry()
    processor = make_processor(telemetry, client, FakeClock())
    await processor.start(FakeHost(telemetry))
    try:
        return processor.process(data)
    finally:
        await processor.shutdown()


def served(
    data: Batch, naming: str, shared_gpu_series: SharedGpuSeries = "device"
) -> dict[str, list[dict[str, str]]]:
    """The label sets of every rendered sample, per family name."""
    store = SeriesStore()
    translator = make_translator(
        naming, shared_gpu_series=shared_gpu_series, dcgm_labels=dcgm.label_names()
    )
    translator.ingest(store, data, now=1.0)
    text, _ = render_text(store.families.values())
    out: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, rest = line.partition("{")
            labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', rest))
            out.setdefault(name, []).append(labels)
    return out


def claim_of(labels: dict[str, str], naming: str) -> tuple[str | None, str | None]:
    name, namespace = OTEL if naming == "otel" else DCGM
    return labels.get(name), labels.get(namespace)


@pytest.fixture
def mixed_node() -> FakePodResources:
    """GPU minor 0 through a DRA claim, GPU 1 through the device plugin (index 1), GPU 2
    through one claim shared by two pods."""
    shared = claim("shared-gpu", "ml", claim_device("gpu-2"))
    return answer(
        pod("ml", "train-0", container("trainer", None, claim("train-gpu", "ml", claim_device("gpu-0")))),
        pod("ml", "plugin-0", container("srv", {"nvidia.com/gpu": ["1"]})),
        pod("ml", "infer-a", container("srv", None, shared)),
        pod("ml", "infer-b", container("srv", None, shared)),
    )  # fmt: skip


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
async def test_allocation_series_name_the_claim_in_both_namings(mixed_node, naming):
    rendered = served(await enriched(mixed_node, node_batch()), naming)
    allocations = {labels[POD[naming]]: claim_of(labels, naming) for labels in rendered[ALLOCATION]}
    assert allocations == {
        "train-0": ("train-gpu", "ml"),
        "plugin-0": (None, None),  # a device-plugin holder names no claim
        "infer-a": ("shared-gpu", "ml"),  # a shared claim: each holder names it
        "infer-b": ("shared-gpu", "ml"),
    }


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
async def test_device_series_keep_only_pod_namespace_container(mixed_node, naming):
    rendered = served(await enriched(mixed_node, node_batch()), naming)
    devices = rendered[DEVICE_SERIES[naming]]
    assert len(devices) == 3  # one per GPU: nothing was copied
    assert sorted(d.get(POD[naming], "") for d in devices) == ["", "plugin-0", "train-0"]
    assert all(claim_of(d, naming) == (None, None) for d in devices)


async def test_per_holder_copies_carry_the_claim_as_dcgm_exporter_does(mixed_node):
    rendered = served(await enriched(mixed_node, node_batch()), "dcgm", "per_holder")
    copies = [d for d in rendered["DCGM_FI_DEV_POWER_USAGE"] if d["gpu"] == "2"]
    assert sorted((d["pod"], *claim_of(d, "dcgm")) for d in copies) == [
        ("infer-a", "shared-gpu", "ml"),
        ("infer-b", "shared-gpu", "ml"),
    ]


async def test_a_container_with_two_claims_on_one_device_names_both():
    client = answer(
        pod(
            "ml",
            "p",
            container(
                "c",
                None,
                claim("b-claim", "ml", claim_device("gpu-0", share_id="s-1")),
                claim("a-claim", "ml", claim_device("gpu-0", share_id="s-2")),
            ),
        )
    )
    data = node_batch()[:1]
    for naming in ("otel", "dcgm"):
        (labels,) = served(await enriched(client, data), naming)[ALLOCATION]
        assert claim_of(labels, naming) == ("a-claim,b-claim", "ml")
