"""dcgm naming renders labels and values exactly as dcgm-exporter 4.8 does, so its dashboards
and alerts match: `Hostname` (or `hostname`), MIG `device`, XID `err_code`/`err_msg`, integers."""

from __future__ import annotations

import re

import pytest

from otelgpu.exporters.prometheus import dcgm, dcgm_xid
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.receivers.nvml import dcgm_names
from tests.unit.exporters.prometheus.batches import batch, counter, gauge, gpu
from tests.unit.exporters.prometheus.translators import make_translator


def served(data: Batch, naming: str = "dcgm", **dcgm_labels: str) -> dict[str, list[str]]:
    """Rendered sample lines per family name."""
    labels = dcgm.label_names(**dcgm_labels)
    return ingested(make_translator(naming, dcgm_labels=labels), SeriesStore(), data)


def ingested(translator: Translator, store: SeriesStore, data: Batch) -> dict[str, list[str]]:
    """`data` ingested into `store` by `translator`; the store's sample lines per family name."""
    translator.ingest(store, data, now=1.0)
    text, _ = render_text(store.families.values())
    lines: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            lines.setdefault(line.split("{", 1)[0], []).append(line)
    return lines


def labels_of(line: str) -> dict[str, str]:
    return dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', line.rsplit("} ", 1)[0]))


def sample(line: str) -> str:
    return line.rsplit(" ", 1)[1]


def test_hostname_label_and_its_lowercase_spelling() -> None:
    data = batch(gpu(0, **{semconv.HOST_NAME: "node-a"}))
    (line,) = served(data)["DCGM_FI_DEV_GPU_TEMP"]
    assert labels_of(line)["Hostname"] == "node-a"
    (line,) = served(data, hostname="hostname")["DCGM_FI_DEV_GPU_TEMP"]
    assert labels_of(line)["hostname"] == "node-a" and "Hostname" not in labels_of(line)


def test_dcgm_labels_option_validates() -> None:
    config = PrometheusExporterConfig.model_validate({"dcgm_labels": {"hostname": "hostname"}})
    assert config.dcgm_labels.hostname == "hostname"
    assert PrometheusExporterConfig().dcgm_labels.hostname == "Hostname"
    with pytest.raises(ValueError, match="hostname"):
        PrometheusExporterConfig.model_validate({"dcgm_labels": {"hostname": "HOSTNAME"}})


def test_mig_device_label_is_its_gpu_as_dcgm_exporter_renders_it() -> None:
    mig = gpu(
        0,
        **{
            semconv.HW_ID: "MIG-1",
            semconv.HW_NAME: "nvidia0/gi3",
            semconv.HW_PARENT: gpu(0)[semconv.HW_ID],
            semconv.MIG_PROFILE: "1g.10gb",
            semconv.MIG_GPU_INSTANCE_ID: "3",
        },
    )
    (line,) = served(batch(mig))["DCGM_FI_DEV_FB_USED"]
    labels = labels_of(line)
    assert labels["device"] == "nvidia0"  # fmt.Sprintf("nvidia%d", GPU): the parent's
    assert (labels["gpu"], labels["GPU_I_ID"], labels["GPU_I_PROFILE"]) == ("0", "3", "1g.10gb")
    assert labels["UUID"] == gpu(0)[semconv.HW_ID]  # the parent's UUID, as dcgm-exporter


def xid_batch(*codes: int) -> Batch:
    points = tuple(({"nvidia.xid.code": code}, 2) for code in codes)
    return (ResourceMetrics(resource=gpu(0), metrics=(counter("nvidia.gpu.xid.errors",
                                                              "{error}", *points),)),)  # fmt: skip


def test_xid_has_err_code_and_err_msg_in_dcgm_naming() -> None:
    (line,) = served(xid_batch(48))["DCGM_FI_DEV_XID_ERRORS"]
    labels = labels_of(line)
    assert (labels["err_code"], labels["err_msg"]) == ("48", "Double Bit ECC Error")
    assert "xid" not in labels
    assert sample(line) == "48"  # dcgm-exporter's gauge holds the XID code
    unknown = served(xid_batch(900))["DCGM_FI_DEV_XID_ERRORS"][0]
    assert labels_of(unknown)["err_msg"] == "Unknown Error"


def test_the_xid_gauge_holds_the_latest_code_and_none_that_is_no_number() -> None:
    """dcgm-exporter's gauge is one series: of two XIDs in one collection, the later one."""
    (line,) = served(xid_batch(48, 79))["DCGM_FI_DEV_XID_ERRORS"]
    assert labels_of(line)["err_code"] == "79" and sample(line) == "79"
    assert "DCGM_FI_DEV_XID_ERRORS" not in served(xid_batch("not-a-code"))  # type: ignore[arg-type]


def test_xid_is_a_gauge_in_dcgm_naming_and_the_per_code_counter_in_otel() -> None:
    store = SeriesStore()
    make_translator("dcgm").ingest(store, xid_batch(48, 79), now=1.0)
    assert store.families["DCGM_FI_DEV_XID_ERRORS"].type == "gauge"
    (line,) = [x for x in served(xid_batch(79), "otel")["nvidia_gpu_xid_errors_total"] if "79" in x]
    assert labels_of(line)["nvidia_xid_code"] == "79" and sample(line) == "2"
    assert "err_msg" not in labels_of(line)


def test_integer_fields_print_as_integers() -> None:
    metrics = (
        gauge("hw.gpu.utilization", "1", 0.55, {"hw.gpu.task": "general"}),
        gauge("nvidia.gpu.memory.busy", "1", 0.29),
        gauge("hw.gpu.memory.usage", "By", 2 * 2**30 + 300_000),
        gauge("nvidia.gpu.sm.clock", "Hz", 1_410_000_000),
        gauge("hw.temperature", "Cel", 41, {"hw.sensor_location": "gpu"}),
        counter("hw.energy", "J", ({}, 1234.567)),
        gauge("hw.power", "W", 312.5),
    )
    lines = served((ResourceMetrics(resource=gpu(0), metrics=metrics),))
    assert sample(lines["DCGM_FI_DEV_GPU_UTIL"][0]) == "55"  # not 55.00000000000001
    assert sample(lines["DCGM_FI_DEV_MEM_COPY_UTIL"][0]) == "29"
    assert sample(lines["DCGM_FI_DEV_FB_USED"][0]) == "2048"  # whole MiB
    assert sample(lines["DCGM_FI_DEV_SM_CLOCK"][0]) == "1410"
    assert sample(lines["DCGM_FI_DEV_GPU_TEMP"][0]) == "41"
    assert sample(lines["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][0]) == "1234567"
    assert sample(lines["DCGM_FI_DEV_POWER_USAGE"][0]) == "312.500000"  # a double: Go's %f


def test_every_dcgm_field_says_whether_it_is_an_integer() -> None:
    assert set(dcgm_names.DCGM_INTEGER) <= set(dcgm_names.DCGM_UNITS)
    assert "DCGM_FI_DEV_POWER_USAGE" not in dcgm_names.DCGM_INTEGER
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in dcgm_names.DCGM_INTEGER  # ratios are doubles
    assert "DCGM_FI_DEV_FB_USED" in dcgm_names.DCGM_INTEGER


def test_xid_message_table() -> None:
    assert len(dcgm_xid.XID_MESSAGES) == 173
    assert dcgm_xid.XID_MESSAGES[79] == "GPU has fallen off the bus"
    assert dcgm_xid.xid_message(-1) == dcgm_xid.xid_message(173) == "Unknown Error"
    # every code has words of its own: an empty err_msg would break alerts grouped by it
    blank = [code for code, text in enumerate(dcgm_xid.XID_MESSAGES) if not text.strip()]
    assert blank == []
    assert all(text == text.strip() for text in dcgm_xid.XID_MESSAGES)


def test_metric_kind_of_an_unused_helper() -> None:
    # Guards the helpers above: a non-monotonic sum renders as a gauge in both namings.
    point = NumberDataPoint(attributes={}, time_unix_nano=1, value=5)
    usage = Metric(
        name="hw.gpu.memory.usage", unit="By", description="d", kind=MetricKind.SUM,
        points=(point,), monotonic=False,
    )  # fmt: skip
    store = SeriesStore()
    make_translator("otel").ingest(store, (ResourceMetrics(resource=gpu(0), metrics=(usage,)),), 1)
    assert store.families["hw_gpu_memory_usage_bytes"].type == "gauge"
