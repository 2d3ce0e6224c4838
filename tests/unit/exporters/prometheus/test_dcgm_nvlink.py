"""NVLink traffic in both namings: the catalog's `nvidia.gpu.nvlink.io` (the receiver adds both
directions) is dcgm-exporter's one `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL` series per GPU, and the
opt-in `nvidia.gpu.nvlink.io.by_direction` keeps its otel name and direction in both namings.
Batch after batch (the replay path too) the series holds the current total."""

from __future__ import annotations

from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.unit.exporters.prometheus.batches import counter, gpu, gpu_metrics
from tests.unit.exporters.prometheus.test_dcgm_labels import ingested, labels_of, sample
from tests.unit.exporters.prometheus.translators import make_translator

FIELD = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"
SPLIT = "nvidia_gpu_nvlink_io_by_direction_bytes_total"


def nvlink_batch(transmit: float, receive: float, gpus: int = 1) -> Batch:
    """Each GPU with the usual metrics, its NVLink total and its bytes per direction."""
    total = counter("nvidia.gpu.nvlink.io", "By", ({}, transmit + receive))
    split = counter(
        "nvidia.gpu.nvlink.io.by_direction", "By",
        ({"network.io.direction": "transmit"}, transmit),
        ({"network.io.direction": "receive"}, receive),
    )  # fmt: skip
    return tuple(
        ResourceMetrics(
            resource=gpu(i), metrics=(*gpu_metrics(), total, split), scope="otelgpu.nvml"
        )
        for i in range(gpus)
    )


def test_dcgm_naming_serves_the_total_as_dcgm_exporters_one_series_per_gpu() -> None:
    translator, store = make_translator("dcgm"), SeriesStore()
    for transmit, receive in ((200, 100), (250, 150), (1_000, 2_000)):
        got = ingested(translator, store, nvlink_batch(transmit, receive, gpus=2))
        assert [sample(line) for line in got[FIELD]] == [str(transmit + receive)] * 2
        assert {labels_of(line)["gpu"] for line in got[FIELD]} == {"0", "1"}
        assert all("network_io_direction" not in labels_of(line) for line in got[FIELD])
        directions = {labels_of(line)["network_io_direction"] for line in got[SPLIT]}
        assert directions == {"transmit", "receive"} and len(got[SPLIT]) == 4


def test_a_float_total_prints_whole_as_dcgm_keeps_the_field() -> None:
    (line,) = ingested(make_translator("dcgm"), SeriesStore(), nvlink_batch(200.5, 100.25))[FIELD]
    assert sample(line) == "301"  # 300.75, rounded: DCGM keeps NVLink bytes as an integer


def test_otel_naming_serves_the_total_and_the_split_under_their_own_names() -> None:
    got = ingested(make_translator("otel"), SeriesStore(), nvlink_batch(200, 100))
    (line,) = got["nvidia_gpu_nvlink_io_bytes_total"]
    assert sample(line) == "300" and "network_io_direction" not in labels_of(line)
    assert sorted(sample(line) for line in got[SPLIT]) == ["100", "200"]
