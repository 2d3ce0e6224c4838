"""dcgm-exporter's one-number fields that the catalog splits: `naming: dcgm` serves their sum.

`DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL` is one series per GPU in dcgm-exporter, the bytes of both
directions; the catalog's `nvidia.gpu.nvlink.io` has a point per direction. dcgm naming adds
them into one series with dcgm-exporter's label set (no direction label); otel naming keeps
both. Batch after batch (the replay path too) the one series holds the current sum.
"""

from __future__ import annotations

from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.replay import Split
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.unit.exporters.prometheus.batches import counter, gpu, gpu_metrics
from tests.unit.exporters.prometheus.test_dcgm_labels import ingested, labels_of, sample
from tests.unit.exporters.prometheus.translators import make_translator

FIELD = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"


def nvlink_batch(transmit: object, receive: object, gpus: int = 1) -> Batch:
    """Each GPU with the usual metrics and its NVLink bytes per direction."""
    io = counter(
        "nvidia.gpu.nvlink.io", "By",
        ({"network.io.direction": "transmit"}, transmit),  # type: ignore[arg-type]
        ({"network.io.direction": "receive"}, receive),  # type: ignore[arg-type]
    )  # fmt: skip
    return tuple(
        ResourceMetrics(resource=gpu(i), metrics=(*gpu_metrics(), io), scope="otelgpu.nvml")
        for i in range(gpus)
    )


def test_dcgm_naming_serves_one_nvlink_series_per_gpu_holding_both_directions() -> None:
    translator, store = make_translator("dcgm"), SeriesStore()
    (line,) = ingested(translator, store, nvlink_batch(200, 100))[FIELD]
    assert sample(line) == "300"
    assert "network_io_direction" not in labels_of(line)
    assert labels_of(line)["UUID"] == gpu(0)["hw.id"]


def test_the_sum_follows_every_batch_on_the_replay_path_too() -> None:
    translator, store = make_translator("dcgm"), SeriesStore()
    for transmit, receive in ((200, 100), (250, 150), (1_000, 2_000)):
        got = ingested(translator, store, nvlink_batch(transmit, receive, gpus=2))[FIELD]
        assert [sample(line) for line in got] == [str(transmit + receive)] * 2
        assert {labels_of(line)["gpu"] for line in got} == {"0", "1"}


def test_float_readings_add_up_and_print_whole_as_dcgm_keeps_the_field() -> None:
    translator, store = make_translator("dcgm"), SeriesStore()
    (line,) = ingested(translator, store, nvlink_batch(200.5, 100.25))[FIELD]
    assert sample(line) == "301"  # 300.75, rounded: DCGM keeps NVLink bytes as an integer
    (line,) = ingested(translator, store, nvlink_batch(1_000, 0.5))[FIELD]
    assert sample(line) == "1000"


def test_a_gpu_with_a_summed_metric_is_still_replayed_and_the_sum_written_each_time() -> None:
    """The resource keeps its replay plan; the summed metric is a step the general path
    writes on every replay (a point-by-point step could not write a sum)."""
    translator, store = make_translator("dcgm"), SeriesStore()
    for _ in range(2):
        ingested(translator, store, nvlink_batch(200, 100))
    (plan,) = translator._plans.values()
    split = [step.descriptor[0] for step in plan.steps if isinstance(step, Split)]
    assert "nvidia.gpu.nvlink.io" in split


def test_both_points_count_as_stored() -> None:
    translator, store = make_translator("dcgm"), SeriesStore()
    data = nvlink_batch(200, 100)
    points = sum(len(m.points) for rm in data for m in rm.metrics)
    for _ in range(3):  # built, then replayed
        assert translator.ingest(store, data, now=1.0) == (points, 0)


def test_a_direction_that_is_not_a_number_leaves_no_half_sum() -> None:
    translator, store = make_translator("dcgm"), SeriesStore()
    ingested(translator, store, nvlink_batch(200, 100))
    data = nvlink_batch(250, "n/a")
    points = sum(len(m.points) for rm in data for m in rm.metrics)
    assert translator.ingest(store, data, now=2.0) == (points - 2, 2)
    text, _ = render_text(store.families.values())
    assert FIELD not in text  # neither 250 (a counter going down) nor 300 (stale)


def test_otel_naming_keeps_a_series_per_direction() -> None:
    translator, store = make_translator("otel"), SeriesStore()
    got = ingested(translator, store, nvlink_batch(200, 100))["nvidia_gpu_nvlink_io_bytes_total"]
    assert sorted((labels_of(x)["network_io_direction"], sample(x)) for x in got) == [
        ("receive", "100"),
        ("transmit", "200"),
    ]
