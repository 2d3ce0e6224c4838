"""dcgm-exporter's own tests as acceptance: each expectation of its unit and e2e tests that
describes what it serves (label sets, metric types, values for given inputs, the auth and
health answers) is checked here against the prometheus exporter in `naming: dcgm`. Each test
names the dcgm-exporter test it takes its facts from. The expectations otelgpu does not meet
are listed, with why, in docs/migrating-from-dcgm-exporter.md ("What dcgm-exporter's tests
expect")."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus import dcgm
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.targets import Targets
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Metric, ResourceMetrics
from otelgpu.processors.filter.config import FilterProcessorConfig
from otelgpu.processors.filter.factory import FilterProcessor
from otelgpu.receivers.nvml.dcgm_names import NAMING
from otelgpu.receivers.nvml.metrics import BY_NAME, HEALTH_METRICS
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.unit.exporters.prometheus.batches import (
    batch,
    counter,
    gauge,
    gpu,
    gpu_metrics,
    held_by,
)
from tests.unit.exporters.prometheus.scrape_auth import HASH, PASSWORD, basic
from tests.unit.exporters.prometheus.test_dcgm_labels import ingested, labels_of, sample
from tests.unit.exporters.prometheus.test_per_holder_process_readings import (
    GiB,
    holder,
    process,
    shared_gpu,
)
from tests.unit.exporters.prometheus.translators import make_translator

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"

# etc/default-counters.csv and etc/dcp-metrics-included.csv: the Prometheus type dcgm-exporter
# declares for each field otelgpu serves in dcgm naming (a commented-out line says the type the
# field has once enabled).
CSV_TYPES: Mapping[str, str] = {
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": "counter",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "counter",
    "DCGM_FI_DEV_DEC_UTIL": "gauge",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "counter",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "counter",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "counter",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "counter",
    "DCGM_FI_DEV_ENC_UTIL": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge",
    "DCGM_FI_DEV_FB_RESERVED": "gauge",
    "DCGM_FI_DEV_FB_USED": "gauge",
    "DCGM_FI_DEV_GPU_TEMP": "gauge",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION": "counter",
    "DCGM_FI_DEV_MEMORY_TEMP": "gauge",
    "DCGM_FI_DEV_MEM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "counter",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "counter",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "counter",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "counter",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "counter",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter",
    "DCGM_FI_DEV_POWER_USAGE": "gauge",
    "DCGM_FI_DEV_POWER_VIOLATION": "counter",
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": "counter",
    "DCGM_FI_DEV_RETIRED_DBE": "counter",
    "DCGM_FI_DEV_RETIRED_PENDING": "counter",
    "DCGM_FI_DEV_RETIRED_SBE": "counter",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "gauge",
    "DCGM_FI_DEV_SM_CLOCK": "gauge",
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION": "counter",
    "DCGM_FI_DEV_THERMAL_VIOLATION": "counter",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "counter",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "gauge",
    "DCGM_FI_DEV_XID_ERRORS": "gauge",
    "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "gauge",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": "gauge",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": "gauge",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gauge",
    "DCGM_FI_PROF_SM_ACTIVE": "gauge",
    "DCGM_FI_PROF_SM_OCCUPANCY": "gauge",
}


def served_types() -> dict[str, str]:
    """Each dcgm field otelgpu serves → the Prometheus type it declares for it."""
    targets = Targets("dcgm", "", NAMING)
    found: dict[str, str] = {}
    for name, names in NAMING.dcgm.items():
        spec = BY_NAME[name]
        metric = Metric(
            name=name,
            unit=spec.unit,
            description="",
            kind=spec.kind,
            monotonic=spec.monotonic,
            points=(),
        )
        if names.split_by:
            for value in names.splits:
                target = targets.of_point(metric, {names.split_by: value})
                found[target.name] = target.type
        else:
            target = targets.of(metric)
            found[target.name] = target.type
    return found


def test_every_field_has_the_type_dcgm_exporters_counters_csv_gives_it() -> None:
    """etc/default-counters.csv, etc/dcp-metrics-included.csv."""
    served = served_types()
    assert {f: t for f, t in served.items() if f in CSV_TYPES} == {
        f: t for f, t in CSV_TYPES.items() if f in served
    }
    assert "DCGM_FI_DEV_RETIRED_PENDING" in served  # the one the catalog's kind disagreed on


def test_a_gpu_series_carries_dcgm_exporters_labels_hostname_as_its_latest_release() -> None:
    """internal/pkg/server/server_test.go TestMetrics "Returns 200" (and rendermetrics): a GPU
    series carries gpu, UUID, pci_bus_id, device, modelName and the host label; the latest
    release (4.5.3-4.8.2) spells it `Hostname`, its main branch `hostname` (#655)."""
    (line,) = ingested(make_translator("dcgm"), SeriesStore(), batch(gpu(0)))[
        "DCGM_FI_DEV_GPU_TEMP"
    ]
    labels = labels_of(line)
    assert set(labels) == {
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "Hostname",
        "DCGM_FI_DRIVER_VERSION",  # default-counters.csv's one label field
    }
    assert (labels["gpu"], labels["device"], labels["modelName"]) == (
        "0",
        "nvidia0",
        "NVIDIA H100 80GB HBM3",  # gpu_collector_test: blanks kept by default
    )
    assert labels["UUID"] == gpu(0)[semconv.HW_ID] and labels["Hostname"] == "gpu-node-1"
    head = make_translator("dcgm", dcgm_labels=dcgm.label_names(hostname="hostname"))
    (line,) = ingested(head, SeriesStore(), batch(gpu(0)))["DCGM_FI_DEV_GPU_TEMP"]
    assert labels_of(line)["hostname"] == "gpu-node-1" and "Hostname" not in labels_of(line)


@pytest.mark.parametrize(
    ("code", "message"),
    [(0, "No Error"), (42, "Video processor exception"), (255, "Unknown Error")],
)
def test_the_xid_field_holds_the_code_with_err_code_and_err_msg(code: int, message: str) -> None:
    """internal/pkg/collector/gpu_collector_test.go TestToMetricWhenDCGM_FI_DEV_XID_ERRORSField:
    value = code, err_code = code, err_msg from its table ("Unknown Error" past it), on the
    GPU's one XID series (code 0: the GPU had no XID yet)."""
    codes = ((code, 1),) if code else ()
    metric = counter(
        "nvidia.gpu.xid.errors", "{error}", *(({"nvidia.xid.code": c}, n) for c, n in codes)
    )
    data = (ResourceMetrics(resource=gpu(0), metrics=(metric,)),)
    (line,) = ingested(make_translator("dcgm"), SeriesStore(), data)["DCGM_FI_DEV_XID_ERRORS"]
    labels = labels_of(line)
    assert (sample(line), labels["err_code"], labels["err_msg"]) == (str(code), str(code), message)


def test_every_gpu_series_of_a_held_gpu_carries_pod_namespace_and_container() -> None:
    """tests/e2e/e2e_verify_default_configuration_test.go "should verify metrics": with a
    workload holding the GPU, every series carries non-empty pod, namespace and container
    (here: every `DCGM_FI_*` series; the families it does not hold for are listed in the
    migration guide)."""
    lines = ingested(make_translator("dcgm"), SeriesStore(), batch(gpu(0, **held_by("w"))))
    fields = [
        line for name, found in lines.items() if name.startswith("DCGM_FI_") for line in found
    ]
    assert len(fields) >= 5
    for line in fields:
        labels = labels_of(line)
        assert (labels["pod"], labels["namespace"], labels["container"]) == ("w", "ml", "trainer")


def test_on_the_charts_gpu_endpoint_every_family_of_a_held_gpu_carries_its_pod() -> None:
    """tests/e2e/e2e_verify_default_configuration_test.go "should verify metrics", for every
    family of the endpoint: the Helm chart's pipeline (values.yaml, gpuStatus) drops the health
    metrics from the GPU endpoint's pipeline (filter/not_gpu_status) and its exporter writes no
    info series (`device_info: false`); they are served apart (filter/gpu_status, the second
    exporter). Without that, `nvidia_gpu_up`'s holder labels follow the GPU but `hw_gpu_info`
    names no pod."""
    up = gauge("nvidia.gpu.up", "{state}", 1, {"hw.state": "ok"})
    held = gpu(0, **held_by("w"))
    read = (ResourceMetrics(resource=held, metrics=(*gpu_metrics(), up), scope="otelgpu.nvml"),)

    def chart_filter(rule: str) -> FilterProcessor:
        config = FilterProcessorConfig.model_validate({"metrics": {rule: sorted(HEALTH_METRICS)}})
        return FilterProcessor(make_settings("filter", Kind.PROCESSOR, SelfTelemetry()), config)

    beside = ingested(make_translator("dcgm"), SeriesStore(), read)
    assert "pod" not in labels_of(beside["hw_gpu_info"][0])  # the expectation, unmet
    gpu_endpoint = ingested(
        make_translator("dcgm", info_series=False),
        SeriesStore(),
        chart_filter("exclude").process(read),
    )
    assert len(gpu_endpoint) >= 5
    for family, found in gpu_endpoint.items():
        for line in found:
            labels = labels_of(line)
            held_by_w = (labels.get("pod"), labels.get("namespace"), labels.get("container"))
            assert held_by_w == ("w", "ml", "trainer"), family
    status = ingested(make_translator("dcgm"), SeriesStore(), chart_filter("include").process(read))
    assert set(status) == {"nvidia_gpu_up", "hw_gpu_info"}


def test_pod_uid_is_a_label_with_the_option_as_with_kubernetes_enable_pod_uid() -> None:
    """internal/pkg/transformation/kubernetes_test.go TestProcessPodMapper_WithUID: with
    `--kubernetes-enable-pod-uid` each held GPU's series carries its pod's `pod_uid` beside
    pod, namespace and container; without it, none (dcgm-exporter's default)."""
    held = gpu(0, **held_by("gpu-pod-0", "default"), **{semconv.K8S_POD_UID: "pod-uid-123"})
    with_uid = make_translator("dcgm", dcgm_labels=dcgm.label_names(pod_uid=True))
    (line,) = ingested(with_uid, SeriesStore(), batch(held))["DCGM_FI_DEV_GPU_TEMP"]
    labels = labels_of(line)
    assert (labels["pod"], labels["namespace"], labels["pod_uid"]) == (
        "gpu-pod-0",
        "default",
        "pod-uid-123",
    )
    (line,) = ingested(make_translator("dcgm"), SeriesStore(), batch(held))["DCGM_FI_DEV_GPU_TEMP"]
    assert not {"pod_uid", "k8s_pod_uid"} & set(labels_of(line))


def test_dra_claim_labels_on_the_device_series_with_the_option() -> None:
    """internal/pkg/transformation/kubernetes_test.go TestPodDRAInfo and kubernetes.go's
    `--kubernetes-enable-dra`: a GPU a pod holds through a DRA claim has its series labelled
    with the pod and `dra_claim_name` / `dra_claim_namespace` (`claim1` in `ns1`); without the
    option, none (dcgm-exporter's default)."""
    claim = {
        semconv.GPU_RESOURCECLAIM_NAME: "claim1",
        semconv.GPU_RESOURCECLAIM_NAMESPACE: "ns1",
        semconv.GPU_ALLOCATION_SOURCE: "dra",
    }
    holder = gpu(0, **held_by("pod1", "default", "ctr1"), **claim)
    allocation = ResourceMetrics(
        resource=holder,
        metrics=(gauge(semconv.GPU_ALLOCATION, "1", 1.0),),
        identity=(semconv.GPU_ALLOCATION, gpu(0)[semconv.HW_ID]),
    )
    data = (*batch(gpu(0, **held_by("pod1", "default", "ctr1"))), allocation)
    with_dra = make_translator("dcgm", dcgm_labels=dcgm.label_names(), dra_labels=True)
    (line,) = ingested(with_dra, SeriesStore(), data)["DCGM_FI_DEV_GPU_TEMP"]
    labels = labels_of(line)
    assert (labels["pod"], labels["dra_claim_name"], labels["dra_claim_namespace"]) == (
        "pod1",
        "claim1",
        "ns1",
    )
    (line,) = ingested(make_translator("dcgm"), SeriesStore(), data)["DCGM_FI_DEV_GPU_TEMP"]
    assert "dra_claim_name" not in labels_of(line)


# --- the HTTP answers ---------------------------------------------------------------------


@contextlib.asynccontextmanager
async def serving(host: FakeHost, **config: Any) -> AsyncIterator[str]:
    """A prometheus exporter in dcgm naming on a free port, serving one GPU; its base URL."""
    cfg = PrometheusExporterConfig.model_validate(
        {"endpoint": "127.0.0.1:0", "naming": "dcgm", **config}
    )
    exporter = PrometheusExporter(make_settings("prometheus", Kind.EXPORTER, host.telemetry), cfg)
    await exporter.start(host)
    try:
        await exporter.consume(
            (ResourceMetrics(resource=gpu(0), metrics=(gauge("hw.power", "W", 300.0),)),)
        )
        await exporter.refresh()  # published now, not at the background task's next turn
        yield f"http://127.0.0.1:{exporter.port}"
    finally:
        await exporter.shutdown()


async def test_basic_auth_refuses_with_401_unauthorized_and_serves_with_the_password(
    host: FakeHost,
) -> None:
    """tests/e2e/e2e_verify_http_basic_auth_test.go: without credentials `/metrics` answers 401
    with a body containing `Unauthorized`; with them, 200."""
    auth = {"basic_auth": {"username": "prom", "password_hash": HASH}}
    async with serving(host, **auth) as url, aiohttp.ClientSession() as session:
        async with session.get(f"{url}/metrics") as response:
            assert response.status == 401
            assert "Unauthorized" in await response.text()
        headers = {"Authorization": basic("prom", PASSWORD)}
        async with session.get(f"{url}/metrics", headers=headers) as response:
            assert response.status == 200
            assert "DCGM_FI_DEV_POWER_USAGE{" in await response.text()


async def test_health_answers_200_and_debug_pprof_is_not_served(host: FakeHost) -> None:
    """internal/pkg/server/server_test.go TestHealthReturnsOK and
    TestPprofEndpointsDisabledByDefault: `/health` answers 200; `/debug/pprof/` is 404."""
    async with serving(host) as url, aiohttp.ClientSession() as session:
        async with session.get(f"{url}/health") as response:
            assert response.status == 200
        async with session.get(f"{url}/debug/pprof/") as response:
            assert response.status == 404


# --- --kubernetes-virtual-gpus (shared_gpu_series: per_holder) ------------------------------


def test_virtual_gpus_give_each_pod_its_processes_readings_and_keep_the_device_series() -> None:
    """internal/pkg/transformation/kubernetes_test.go TestPodMapper_CreatePerProcessMetrics
    (a pod's process at 50% with 1 GiB reads 50 and 1024, an idle pod 0 and 0, `vgpu` on its
    series) and TestKubernetesVirtualGPUs_UnusedGPUsPreserveMetrics (a GPU no pod uses keeps
    its series, with no pod)."""
    data = (
        shared_gpu(utilization=0.5, memory=GiB),
        holder("active-pod", "0"),
        holder("idle-pod", "1"),
        process(1001, "active-pod", 0.5, GiB),
        ResourceMetrics(resource=gpu(1), metrics=(gauge("hw.power", "W", 42.0),)),
    )
    lines = ingested(make_translator("dcgm", shared_gpu_series="per_holder"), SeriesStore(), data)
    util = {labels_of(x).get("pod", ""): (sample(x), labels_of(x)) for x in lines[GPU_UTIL]}
    assert {pod: value for pod, (value, _) in util.items()} == {
        "": "50",
        "active-pod": "50",
        "idle-pod": "0",
    }
    assert (util["active-pod"][1]["vgpu"], util["idle-pod"][1]["vgpu"]) == ("0", "1")
    fb = {labels_of(x).get("pod", ""): sample(x) for x in lines["DCGM_FI_DEV_FB_USED"]}
    assert fb == {"": "1024", "active-pod": "1024", "idle-pod": "0"}
    (unused,) = [x for x in lines["DCGM_FI_DEV_POWER_USAGE"] if labels_of(x)["gpu"] == "1"]
    assert "pod" not in labels_of(unused) and sample(unused) == "42.000000"
