"""GPM metrics added for dcgm-exporter's DCGM_FI_PROF_* fields: units (ratio, By/s), per MIG
instance, unsupported metrics remembered per device, sample buffers freed."""

from __future__ import annotations

import time

import pynvml as real
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.fields_parity import PARITY_GPM_IDS, gpm_convert
from otelgpu.receivers.nvml.receiver import GPM_REFRESH, NvmlReceiver
from otelgpu.receivers.nvml.sources import GPM_METRIC_IDS
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink
from tests.unit.receivers.nvml.conftest import MakeReceiver, by_id, metrics, sim, value
from tests.unit.receivers.nvml.test_real_backend import GPU0, GPU1, FakePynvml, fake

__all__ = ["fake"]  # a pytest fixture, imported for use here

NEW_RATIOS = (
    "nvidia.gpu.sm.occupancy",
    "nvidia.gpu.pipe.fp64.active",
    "nvidia.gpu.pipe.fp32.active",
    "nvidia.gpu.pipe.fp16.active",
)
RATES = (
    "nvidia.gpu.nvlink.tx.throughput",
    "nvidia.gpu.nvlink.rx.throughput",
    "nvidia.gpu.gpm.pcie.tx.throughput",
    "nvidia.gpu.gpm.pcie.rx.throughput",
)
ON_BY_DEFAULT = (  # dcgm-exporter's default DCGM_FI_PROF_* fields
    "nvidia.gpu.graphics.active",
    "nvidia.gpu.tensor.active",
    "nvidia.gpu.dram.active",
)


def test_gpm_ids_match_nvidia_ml_py() -> None:
    for name, metric_id in PARITY_GPM_IDS.items():
        assert getattr(real, name) == metric_id, name
        assert GPM_METRIC_IDS[name] == metric_id


def test_gpm_conversion() -> None:
    assert gpm_convert("NVML_GPM_METRIC_FP64_UTIL", 42.0) == 0.42
    # a real H100 gave DRAM_BW_UTIL over 100 % between two samples ~7 ms apart
    assert gpm_convert("NVML_GPM_METRIC_DRAM_BW_UTIL", 104.2) == 1.0
    assert gpm_convert("NVML_GPM_METRIC_SM_UTIL", -0.5) == 0.0
    assert gpm_convert("NVML_GPM_METRIC_PCIE_TX_PER_SEC", 3.0) == 3 * 2**20
    assert gpm_convert("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", 1.5) == 1.5 * 2**20


async def test_new_gpm_metrics_on_the_gpu_and_each_mig_instance(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(
        metric_set="all",
        simulated={"gpus": [{"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}, {"uuid": "MIG-a2"}]}]},
    )
    await receiver.scrape()
    second = by_id(await receiver.scrape())
    for uuid in ("GPU-a", "MIG-a1", "MIG-a2"):
        for name in NEW_RATIOS:
            assert 0 < value(second[uuid], name) <= 1, (uuid, name)
        for name in RATES:
            # MiB/s from NVML, bytes/s here: at least a MiB/s at the simulated load.
            assert value(second[uuid], name) >= 2**20, (uuid, name)
    assert value(second["MIG-a1"], "nvidia.gpu.pipe.fp32.active") != value(
        second["MIG-a2"], "nvidia.gpu.pipe.fp32.active"
    )
    # two instances: the sample taken when NVML opened, then one a cycle
    assert sim(receiver).calls["nvmlGpmMigSampleGet"] == 6
    await receiver.shutdown()
    assert sim(receiver).calls["nvmlGpmSampleFree"] == sim(receiver).calls["nvmlGpmSampleAlloc"]


async def test_only_dcgm_exporters_default_gpm_metrics_are_on_by_default(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver()
    await receiver.scrape()
    (gpu,) = by_id(await receiver.scrape()).values()
    for name in (*NEW_RATIOS, *RATES, "nvidia.gpu.sm.active"):
        assert name not in metrics(gpu), name
    for name in ON_BY_DEFAULT:
        assert 0 < value(gpu, name) <= 1, name


async def test_an_unsupported_gpm_metric_is_dropped_for_that_gpu_only(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(
        metric_set="all",
        simulated={
            "gpus": [
                {"uuid": "GPU-a", "unsupported_fields": ["NVML_GPM_METRIC_FP64_UTIL"]},
                {"uuid": "GPU-b"},
            ]
        },
    )
    await receiver.scrape()
    await receiver.scrape()
    found = by_id(await receiver.scrape())
    assert "nvidia.gpu.pipe.fp64.active" not in metrics(found["GPU-a"])
    assert "nvidia.gpu.pipe.fp32.active" in metrics(found["GPU-a"])
    assert "nvidia.gpu.pipe.fp64.active" in metrics(found["GPU-b"])


async def test_gpm_through_the_real_backend(
    fake: FakePynvml, telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> None:
    del fake.devices[GPU1]  # GPU 0 supports GPM (the fake's rule)
    fake.devices[GPU0].mig_mode = real.NVML_DEVICE_MIG_DISABLE
    fake.unsupported_gpm = {real.NVML_GPM_METRIC_FP16_UTIL}
    config = NvmlReceiverConfig.model_validate({"backend": "nvml", "metric_set": "all"})
    receiver = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, telemetry), config, sink, clock=clock
    )
    try:
        await receiver.scrape()
        await receiver.scrape()
        gpu = by_id(await receiver.scrape())["GPU-aaaa"]
    finally:
        await receiver.shutdown()
    # The fake answers metric id * 1.5 (percent or MiB/s).
    assert value(gpu, "nvidia.gpu.pipe.fp64.active") == pytest.approx(11 * 1.5 / 100)
    assert value(gpu, "nvidia.gpu.sm.occupancy") == pytest.approx(3 * 1.5 / 100)
    assert value(gpu, "nvidia.gpu.nvlink.tx.throughput") == 61 * 1.5 * 2**20
    assert value(gpu, "nvidia.gpu.gpm.pcie.rx.throughput") == 21 * 1.5 * 2**20
    assert "nvidia.gpu.pipe.fp16.active" not in metrics(gpu)
    requested = fake.called("nvmlGpmMetricsGet")
    assert real.NVML_GPM_METRIC_FP16_UTIL in requested[0][3]
    assert real.NVML_GPM_METRIC_FP16_UTIL not in requested[-1][3]  # remembered as unsupported
    frees = len(fake.called("nvmlGpmSampleFree"))
    assert frees == len(fake.called("nvmlGpmSampleAlloc")) == 2


# nvmlDeviceGetPcieThroughput sleeps through a 20 ms sample per direction: on an H100 (driver
# 580) it was 41.5 ms of a 49.8 ms cycle, per GPU, one GPU after another. Where the GPU has GPM,
# the same rates come from it (averaged over the interval, as dcgm's DCGM_FI_PROF_PCIE_*).
PCIE = ("nvidia.gpu.pcie.tx.throughput", "nvidia.gpu.pcie.rx.throughput")


async def test_pcie_rates_come_from_gpm_without_the_20ms_samples(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(simulated={"gpus": [{"uuid": "GPU-a"}]})
    for _ in range(2):
        gpu = by_id(await receiver.scrape())["GPU-a"]
        for name in PCIE:
            assert value(gpu, name) >= 2**20, name  # MiB/s from GPM, in bytes/s
    assert sim(receiver).calls["nvmlDeviceGetPcieThroughput"] == 0
    await receiver.shutdown()


async def test_pcie_rates_use_the_20ms_sample_on_a_gpu_without_gpm(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(simulated={"gpus": [{"uuid": "GPU-a", "gpm": False}]})
    (gpu,) = by_id(await receiver.scrape()).values()
    for name in PCIE:
        assert value(gpu, name) > 0, name
    assert sim(receiver).calls["nvmlDeviceGetPcieThroughput"] == 2
    await receiver.shutdown()


async def test_pcie_rates_fall_back_to_the_sample_where_gpm_refuses_them(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(
        simulated={
            "gpus": [
                {
                    "uuid": "GPU-a",
                    "unsupported_fields": [
                        "NVML_GPM_METRIC_PCIE_TX_PER_SEC",
                        "NVML_GPM_METRIC_PCIE_RX_PER_SEC",
                    ],
                }
            ]
        }
    )
    first = by_id(await receiver.scrape())  # GPM answers NOT_SUPPORTED for the two: remembered
    assert not set(PCIE) & set(metrics(first["GPU-a"]))
    (gpu,) = by_id(await receiver.scrape()).values()
    for name in PCIE:
        assert value(gpu, name) > 0, name
    assert sim(receiver).calls["nvmlDeviceGetPcieThroughput"] == 2  # the second cycle only
    await receiver.shutdown()


async def test_both_pcie_rate_metrics_on_read_gpm_once_and_each_emit_once(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(
        metrics={name: {"enabled": True} for name in RATES},
        simulated={"gpus": [{"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}]}]},
    )
    await receiver.scrape()
    second = by_id(await receiver.scrape())
    gpu = metrics(second["GPU-a"])
    for name in ("nvidia.gpu.pcie.tx.throughput", "nvidia.gpu.gpm.pcie.tx.throughput"):
        assert len(gpu[name].points) == 1, name
    assert value(second["GPU-a"], "nvidia.gpu.pcie.tx.throughput") == value(
        second["GPU-a"], "nvidia.gpu.gpm.pcie.tx.throughput"
    )
    # A MIG instance keeps what it had: GPM's own rates, no PCIe rate of the whole GPU's link.
    assert not set(PCIE) & set(metrics(second["MIG-a1"]))
    assert "nvidia.gpu.gpm.pcie.tx.throughput" in metrics(second["MIG-a1"])
    await receiver.shutdown()


# GPM needs two samples over 100 ms apart (NVML's GPM documentation). The receiver used to
# take the first with its first collection, so a start, and every reload (whose new receiver
# replaced each GPU's series at its first collection), served no GPM-derived series for one
# interval: 1524 of 10813 series on P7's node (tests/integration/test_reload_keeps_series.py).
async def test_the_first_collection_has_gpms_figures_from_samples_over_100ms_apart(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(
        metric_set="all",
        simulated={"gpus": [{"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}]}, {"uuid": "GPU-b"}]},
    )
    taken: list[float] = []
    client = sim(receiver)
    sample = client.gpm_sample

    def timed(handle: object, buffer: object) -> None:
        taken.append(time.monotonic())
        sample(handle, buffer)  # type: ignore[arg-type]

    client.gpm_sample = timed  # type: ignore[method-assign]
    first = by_id(await receiver.scrape())
    for uuid in ("GPU-a", "MIG-a1", "GPU-b"):
        for name in ("nvidia.gpu.sm.active", *NEW_RATIOS):
            assert 0 < value(first[uuid], name) <= 1, (uuid, name)
    for uuid in ("GPU-a", "GPU-b"):
        for name in PCIE:
            assert value(first[uuid], name) >= 2**20, (uuid, name)
    # none for a GPU: the two are MIG-a1's, refused once (a MIG slice has no PCIe link)
    assert client.calls["nvmlDeviceGetPcieThroughput"] == 2
    assert len(taken) == 4  # two GPUs: the first sample when NVML opened, then the cycle's
    assert taken[2] - taken[1] >= GPM_REFRESH > 0.1
    await receiver.scrape()
    assert len(taken) == 6  # then one a cycle, as before
    await receiver.shutdown()
    assert client.calls["nvmlGpmSampleFree"] == client.calls["nvmlGpmSampleAlloc"] == 6
