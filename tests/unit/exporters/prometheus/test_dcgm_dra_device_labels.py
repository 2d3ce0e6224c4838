"""`dcgm_labels.dra`: a device one pod holds whole through a DRA claim has the claim on its
series in dcgm naming, as dcgm-exporter's `--kubernetes-enable-dra`; a new claim replaces the
old on the next batch (the replay plan is keyed on it), a shared device names none."""

from __future__ import annotations

from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.unit.exporters.prometheus.batches import gauge, gpu, gpu_metrics, held_by
from tests.unit.exporters.prometheus.test_dcgm_labels import ingested, labels_of
from tests.unit.exporters.prometheus.translators import make_translator

UUID0 = gpu(0)[semconv.HW_ID]


def held(claim: str, *, shared: bool = False) -> Batch:
    """GPU 0 and its holder's allocation series, the holder's claim `claim`."""
    pod = held_by("p") if not shared else {}
    extra = {semconv.GPU_SHARED: True} if shared else {}
    device = ResourceMetrics(resource=gpu(0, **pod, **extra), metrics=gpu_metrics(), identity=UUID0)
    holder = gpu(
        0,
        **held_by("p"),
        **extra,
        **{semconv.GPU_RESOURCECLAIM_NAME: claim, semconv.GPU_RESOURCECLAIM_NAMESPACE: "ml"},
    )
    allocation = ResourceMetrics(
        resource=holder,
        metrics=(gauge(semconv.GPU_ALLOCATION, "1", 1.0),),
        identity=(semconv.GPU_ALLOCATION, UUID0),
    )
    return (device, allocation)


def test_a_new_claim_replaces_the_old_one_on_the_device_series() -> None:
    translator, store = make_translator("dcgm", dra_labels=True), SeriesStore()
    for claim in ("first", "first", "second", "second"):  # general path, replay, new shape
        (line,) = ingested(translator, store, held(claim))["DCGM_FI_DEV_GPU_TEMP"]
        assert labels_of(line)["dra_claim_name"] == claim


def test_a_shared_device_names_no_claim_in_device_mode() -> None:
    (line,) = ingested(
        make_translator("dcgm", dra_labels=True), SeriesStore(), held("c", shared=True)
    )["DCGM_FI_DEV_GPU_TEMP"]
    assert "dra_claim_name" not in labels_of(line) and "pod" not in labels_of(line)


def test_otel_naming_keeps_the_claim_on_the_allocation_series_only() -> None:
    lines = ingested(make_translator("otel", dra_labels=True), SeriesStore(), held("c"))
    (line,) = lines["hw_temperature_celsius"]
    assert "nvidia_gpu_resourceclaim_name" not in labels_of(line)
