"""Static device facts (serial, VBIOS, driver, minor, vendor, ...) are on one info series per
device (`hw_gpu_info`, value 1), joinable by the device's id, and on no other series; in
`naming: dcgm` every series carries exactly dcgm-exporter's labels, its holder's and the
business labels processors added."""

from __future__ import annotations

import asyncio
import re

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue, Batch, ResourceMetrics
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from tests.fakes import Sink
from tests.unit.exporters.prometheus.batches import counter, gauge, gpu, held_by
from tests.unit.exporters.prometheus.translators import make_translator, nvml_settings

INFO = "hw_gpu_info"
GPU0 = "GPU-00000000-0000-4000-8000-0000000000a0"
GPU1 = "GPU-00000000-0000-4000-8000-0000000000a1"
MIG = "MIG-00000000-0000-4000-8000-0000000000b1"
# What the simulated receiver sets as resource attributes that are static facts, by naming.
FACT_LABELS = {
    "otel": {
        "hw_vendor",
        "hw_serial_number",
        "hw_firmware_version",
        "hw_driver_version",
        "nvidia_gpu_minor",
        "hw_type",
        "otelgpu_simulated",
        "nvidia_mig_compute_instance_id",
        "nvidia_mig_placement_start",
    },
    "dcgm": {
        "hw_vendor",
        "DCGM_FI_DEV_SERIAL",
        "DCGM_FI_DEV_VBIOS_VERSION",
        "nvidia_gpu_minor",
        "hw_type",
        "otelgpu_simulated",
        "nvidia_mig_compute_instance_id",
        "nvidia_mig_placement_start",
    },
}
# dcgm-exporter's labels on every series in its default configuration (render_metrics.go's
# template, and DCGM_FI_DRIVER_VERSION, the label field its default-counters.csv enables).
DCGM_DEVICE = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}
DCGM_LABELS = {*DCGM_DEVICE, "DCGM_FI_DRIVER_VERSION"}
DCGM_MIG = {"GPU_I_PROFILE", "GPU_I_ID"}


def lines_of(store: SeriesStore) -> list[str]:
    text, _ = render_text(store.families.values())
    return [line for line in text.splitlines() if not line.startswith("#")]


def labels_of(line: str) -> dict[str, str]:
    return dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', line.rsplit("} ", 1)[0]))


def family_of(line: str) -> str:
    return line.split("{", 1)[0].split(" ", 1)[0]


def served(naming: str, *batches: Batch, **options: object) -> list[str]:
    store, t = SeriesStore(), make_translator(naming, **options)
    for n, data in enumerate(batches):
        t.ingest(store, data, now=float(n))
    return lines_of(store)


def simulated_batch() -> Batch:
    """Two simulated GPUs, the first with a MIG instance, the second running a process, read
    by the real receiver (its second scrape: every reading in)."""
    config = NvmlReceiverConfig.model_validate(
        {
            "backend": "simulated",
            "processes": True,
            "metrics": {"nvidia.gpu.process.memory.usage": {"enabled": True}},
            "host_proc": "/nonexistent",
            "simulated": {
                "gpus": [
                    {"uuid": GPU0, "mig": [{"uuid": MIG, "profile": "1g.10gb"}]},
                    {"uuid": GPU1, "processes": [{"pid": 4242, "used_memory": "1GiB"}]},
                ]
            },
        }
    )

    async def scrape() -> Batch:
        receiver = NvmlReceiver(
            nvml_settings("nvml", Kind.RECEIVER, SelfTelemetry()), config, Sink()
        )
        try:
            await receiver.scrape()
            return await receiver.scrape()
        finally:
            await receiver.shutdown()

    return asyncio.run(scrape())


@pytest.fixture(scope="module")
def node() -> Batch:
    return simulated_batch()


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_static_facts_are_on_the_info_series_only(node: Batch, naming: str) -> None:
    lines = served(naming, node)
    info = [line for line in lines if family_of(line) == INFO]
    others = [line for line in lines if family_of(line) != INFO]
    assert others
    for line in others:
        assert not FACT_LABELS[naming] & set(labels_of(line)), line
    # One per device (two GPUs and a MIG instance; not per process), each with its facts; in
    # dcgm naming a MIG GPU left out of dcgm-exporter's device set keeps its health and info.
    assert len(info) == 3
    for line in info:
        assert line.endswith("} 1")
        found = labels_of(line)
        if naming == "otel":
            assert {"hw_id", "hw_vendor", "hw_serial_number", "hw_firmware_version"} <= set(found)
            assert {"hw_driver_version", "nvidia_gpu_minor", "hw_type"} <= set(found)
        else:
            assert {"UUID", "DCGM_FI_DEV_SERIAL", "DCGM_FI_DEV_VBIOS_VERSION"} <= set(found)
            assert {"DCGM_FI_DRIVER_VERSION", "hw_vendor", "nvidia_gpu_minor"} <= set(found)
    ids = [labels_of(line)["hw_id" if naming == "otel" else "UUID"] for line in info]
    if naming == "otel":
        assert sorted(ids) == sorted([GPU0, GPU1, MIG])
    else:  # a MIG instance: its GPU's UUID and its GPU_I_ID, its own UUID as hw_id
        (mig,) = [line for line in info if "GPU_I_ID" in labels_of(line)]
        assert labels_of(mig)["UUID"] == GPU0 and labels_of(mig)["hw_id"] == MIG


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_every_series_joins_its_info_series_on_the_device_id(node: Batch, naming: str) -> None:
    """`* on (hw_id) group_left (...) hw_gpu_info` (dcgm: `on (UUID, GPU_I_ID)`): every device
    series finds exactly one info series, whose identity labels it shares."""
    keys = ("hw_id",) if naming == "otel" else ("UUID", "GPU_I_ID")
    lines = served(naming, node)
    info: dict[tuple[str, ...], dict[str, str]] = {}
    for line in lines:
        if family_of(line) == INFO:
            labels = labels_of(line)
            key = tuple(labels.get(k, "") for k in keys)
            assert key not in info  # unique on the join key: group_left works
            info[key] = labels
    for line in lines:
        labels = labels_of(line)
        if family_of(line) == INFO or not labels or family_of(line).startswith("otelgpu_"):
            continue
        partner = info[tuple(labels.get(k, "") for k in keys)]
        shared = set(labels) & set(partner)
        assert all(labels[k] == partner[k] for k in shared), (line, partner)


def test_dcgm_series_carry_exactly_dcgm_exporters_labels() -> None:
    """A GPU and a MIG instance held by pods, with what k8s_attributes and container_env add:
    dcgm-exporter's labels, the holder's and the business labels; nothing else."""
    business = {"container.env.TEAM": "vision", "k8s.pod.label.app": "trainer"}
    holder = {**held_by("train-0"), semconv.K8S_NODE_NAME: "gpu-node-1", **business}
    whole = gpu(0, **holder, **_facts())
    mig = gpu(
        0,
        **holder,
        **_facts(),
        **{
            semconv.HW_ID: MIG,
            semconv.HW_NAME: "nvidia0/gi3",
            semconv.HW_PARENT: gpu(0)[semconv.HW_ID],
            semconv.MIG_PROFILE: "1g.10gb",
            semconv.MIG_GPU_INSTANCE_ID: "3",
            semconv.MIG_COMPUTE_INSTANCE_ID: "0",
        },
    )
    point = {semconv.HW_ID: "", semconv.HW_TYPE: "gpu"}  # the receiver repeats these on points
    metrics = (
        gauge("hw.power", "W", 300.0, {**point, semconv.HW_ID: whole[semconv.HW_ID]}),
        counter("hw.energy", "J", ({**point, semconv.HW_ID: whole[semconv.HW_ID]}, 5.0)),
    )
    mig_metrics = (gauge("hw.gpu.memory.usage", "By", 2**30, {**point, semconv.HW_ID: MIG}),)
    data = (
        ResourceMetrics(resource=whole, metrics=metrics),
        ResourceMetrics(resource=mig, metrics=mig_metrics),
    )
    holder_labels = {"pod", "namespace", "container", "env_TEAM", "app"}
    for line in served("dcgm", data):
        labels = set(labels_of(line))
        if family_of(line) == INFO:
            continue
        expected = DCGM_LABELS | holder_labels | (DCGM_MIG if "GPU_I_ID" in labels else set())
        assert labels == expected, line


def test_a_dcgm_line_is_no_longer_than_dcgm_exporters() -> None:
    """The same series as dcgm-exporter writes it (its template's label order), byte for
    byte the same length: nothing added to the labels it has."""
    resource = gpu(0, **held_by("train-0"), **_facts())
    data = (ResourceMetrics(resource=resource, metrics=(gauge("hw.power", "W", 312.5),)),)
    (line,) = [x for x in served("dcgm", data) if x.startswith("DCGM_FI_DEV_POWER_USAGE{")]
    labels = labels_of(line)
    order = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"]
    rest = sorted(set(labels) - set(order))  # Labels: a Go map, ranged in key order
    theirs = (
        "DCGM_FI_DEV_POWER_USAGE{"
        + ",".join(f'{k}="{labels[k]}"' for k in [*order, *rest])
        + "} 312.500000"  # a double, as dcgm-exporter prints it (%f)
    )
    assert rest == ["DCGM_FI_DRIVER_VERSION", "container", "namespace", "pod"]
    assert len(line) <= len(theirs)


def test_the_info_series_follows_its_device() -> None:
    """Expiry, an identity that says it has no series now, a fact that changed: the info series
    goes (or is replaced) with the device's other series."""
    resource = gpu(0, **_facts())
    device = ResourceMetrics(
        resource=resource, metrics=(gauge("hw.power", "W", 1.0),), identity="gpu0"
    )
    store, t = SeriesStore(), make_translator("otel")
    t.ingest(store, (device,), now=1.0)
    t.ingest(store, (device,), now=2.0)  # replayed
    assert [family_of(x) for x in lines_of(store)].count(INFO) == 1
    assert store.expire(now=100.0, max_age=10.0) == 2
    assert lines_of(store) == []

    t.ingest(store, (device,), now=200.0)
    gone = ResourceMetrics(resource=resource, metrics=(), identity="gpu0")
    t.ingest(store, (gone,), now=201.0)
    assert lines_of(store) == []

    t.ingest(store, (device,), now=300.0)
    upgraded = {**resource, semconv.HW_DRIVER_VERSION: "560.1"}
    t.ingest(
        store,
        (ResourceMetrics(resource=upgraded, metrics=device.metrics, identity="gpu0"),),
        now=301.0,
    )
    (info,) = [x for x in lines_of(store) if family_of(x) == INFO]
    assert labels_of(info)["hw_driver_version"] == "560.1"


def test_holders_and_processes_do_not_make_info_series() -> None:
    """A pod moving onto the GPU does not touch its info series; a process and an allocation
    series of the GPU add none (they join on the same hw_id)."""
    device = ResourceMetrics(resource=gpu(0, **_facts()), metrics=(gauge("hw.power", "W", 1.0),))
    process = ResourceMetrics(
        resource=gpu(0, **_facts(), **{semconv.PROCESS_PID: 42}),
        metrics=(gauge("nvidia.gpu.process.memory.usage", "By", 5.0),),
    )
    allocation = ResourceMetrics(
        resource=gpu(0, **_facts(), **held_by("a")),
        metrics=(gauge(semconv.GPU_ALLOCATION, "1", 1.0),),
    )
    lines = served("otel", (device, process, allocation))
    (info,) = [x for x in lines if family_of(x) == INFO]
    assert "k8s_pod_name" not in info and "process_pid" not in info
    held = ResourceMetrics(resource=gpu(0, **_facts(), **held_by("a")), metrics=device.metrics)
    assert [x for x in served("otel", (held,)) if family_of(x) == INFO] == [info]


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_device_info_false_writes_no_info_series_and_keeps_the_rest(
    node: Batch, naming: str
) -> None:
    """`device_info: false`, for an exporter whose devices' info series another exporter
    serves (the chart's GPU endpoint, beside its GPU status endpoint): no info series, every
    other series as with it, facts still off them; on every batch, the replayed ones too."""
    with_info = served(naming, node, node)
    without = served(naming, node, node, info_series=False)
    assert [x for x in with_info if family_of(x) == INFO]
    assert without == [x for x in with_info if family_of(x) != INFO]
    assert not {k for x in without for k in labels_of(x)} & FACT_LABELS[naming]


def test_device_info_is_on_by_default_and_a_bool() -> None:
    from otelgpu.exporters.prometheus.config import PrometheusExporterConfig

    assert PrometheusExporterConfig().device_info is True
    assert PrometheusExporterConfig.model_validate({"device_info": False}).device_info is False
    with pytest.raises(ValueError, match="device_info"):
        PrometheusExporterConfig.model_validate({"device_info": "sometimes"})


def test_the_info_series_is_namespaced_and_typed_gauge() -> None:
    store, t = SeriesStore(), make_translator("otel", namespace="gpu")
    t.ingest(
        store, (ResourceMetrics(resource=gpu(0), metrics=(gauge("hw.power", "W", 1.0),)),), 1.0
    )
    family = store.families["gpu_hw_gpu_info"]
    assert family.type == "gauge" and "hw_id" in family.help


def test_a_resource_without_hw_id_keeps_every_label() -> None:
    """Only devices have an info series: elsewhere a fact-like attribute stays a label."""
    other = {"hw.vendor": "ACME", "service.name": "x"}
    (line,) = served("otel", (ResourceMetrics(resource=other, metrics=(gauge("m", "1", 1.0),)),))
    assert 'hw_vendor="ACME"' in line


def _facts() -> dict[str, AttrValue]:
    return {
        semconv.HW_SERIAL_NUMBER: "1650123456789",
        semconv.HW_FIRMWARE_VERSION: "96.00.99.00.01",
        semconv.GPU_MINOR: "0",
        semconv.SIMULATED: True,
    }
