"""`DCGM_FI_DEV_XID_ERRORS` in dcgm naming is shaped as dcgm-exporter shapes it: one series per
watched GPU, `0` with `err_code="0"` / `err_msg="No Error"` until its first XID, then the code
of its latest XID (value and `err_code`), kept until another XID replaces it. In otel naming the
per-code counter stays, and a GPU without XIDs has none of its series."""

from __future__ import annotations

from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.unit.exporters.prometheus.batches import counter, gauge, gpu
from tests.unit.exporters.prometheus.test_dcgm_labels import ingested, labels_of, sample
from tests.unit.exporters.prometheus.translators import make_translator

XID = "DCGM_FI_DEV_XID_ERRORS"


def watched(index: int, *codes: tuple[int, int]) -> ResourceMetrics:
    """GPU `index` as the nvml receiver reports it when it watches its XIDs: the per-code
    counts, latest XID last (none: the metric without points)."""
    points = tuple(({"nvidia.xid.code": code}, count) for code, count in codes)
    metrics = (
        gauge("hw.temperature", "Cel", 41, {"hw.sensor_location": "gpu"}),
        counter("nvidia.gpu.xid.errors", "{error}", *points),
    )
    return ResourceMetrics(resource=gpu(index), metrics=metrics, identity=("gpu", index))


def test_every_watched_gpu_reads_0_no_error_before_its_first_xid() -> None:
    lines = ingested(make_translator("dcgm"), SeriesStore(), (watched(0), watched(1)))
    assert len(lines[XID]) == 2
    for index, line in enumerate(sorted(lines[XID], key=lambda x: labels_of(x)["gpu"])):
        labels = labels_of(line)
        assert (labels["gpu"], labels["err_code"], labels["err_msg"]) == (
            str(index),
            "0",
            "No Error",
        )
        assert sample(line) == "0"


def test_a_gpu_without_xid_watching_has_no_xid_series() -> None:
    unwatched = ResourceMetrics(
        resource=gpu(0),
        metrics=(gauge("hw.temperature", "Cel", 41, {"hw.sensor_location": "gpu"}),),
    )
    assert XID not in ingested(make_translator("dcgm"), SeriesStore(), (unwatched,))


def test_one_series_per_gpu_holds_its_latest_xid() -> None:
    (line,) = ingested(make_translator("dcgm"), SeriesStore(), (watched(0, (48, 3), (79, 1)),))[XID]
    labels = labels_of(line)
    assert (labels["err_code"], labels["err_msg"]) == ("79", "GPU has fallen off the bus")
    assert sample(line) == "79"


def test_the_xid_series_lives_on_until_another_xid_replaces_it() -> None:
    translator, store = make_translator("dcgm"), SeriesStore()
    history: list[Batch] = [
        (watched(0),),
        (watched(0, (48, 1)),),
        (watched(0, (48, 1)),),  # no new XID: the last one stays, as DCGM's field does
        (watched(0, (48, 1)),),
        (watched(0, (48, 1), (13, 1)),),
        (watched(0, (13, 1), (48, 2)),),  # 48 again: the latest again
    ]
    seen = []
    for data in history:
        (line,) = ingested(translator, store, data)[XID]
        seen.append((labels_of(line)["err_code"], sample(line)))
    assert seen == [
        ("0", "0"),
        ("48", "48"),
        ("48", "48"),
        ("48", "48"),
        ("13", "13"),
        ("48", "48"),
    ]


def test_the_xid_points_count_as_stored() -> None:
    translator, store = make_translator("dcgm"), SeriesStore()
    for _ in range(3):  # the general path, then the replay
        assert translator.ingest(store, (watched(0, (48, 3), (79, 1)),), now=1.0)[1] == 0
        assert translator.ingest(store, (watched(0),), now=1.0)[1] == 0


def test_otel_naming_keeps_the_per_code_counter_and_no_series_without_xids() -> None:
    lines = ingested(make_translator("otel"), SeriesStore(), (watched(0), watched(1, (48, 3))))
    (line,) = lines["nvidia_gpu_xid_errors_total"]
    assert labels_of(line)["nvidia_xid_code"] == "48" and sample(line) == "3"
