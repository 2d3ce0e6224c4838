"""Which devices `naming: dcgm` serves: dcgm-exporter's device set (`-d`, `--devices`), chosen by
the nvml receiver's `dcgm_devices`; `naming: otel` serves every GPU and every MIG instance.

Facts from NVIDIA/dcgm-exporter (`pkg/cmd/app.go` `parseDeviceOptions`,
`internal/pkg/devicemonitoring` `GetMonitoredEntities`, its test "GPU Count 2, GPU Instance Count
2 and 0, Flex = true"): the default `-d f` serves a GPU with MIG instances as its instances and
leaves the GPU itself out, and serves a GPU without instances as itself; `g` serves every GPU and
no instance; `i` every instance and no GPU."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Batch
from otelgpu.processors.filter.config import FilterProcessorConfig
from otelgpu.processors.filter.factory import FilterProcessor
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from tests.conftest import make_settings
from tests.unit.exporters.prometheus.test_dcgm_labels import ingested, labels_of
from tests.unit.exporters.prometheus.translators import make_translator
from tests.unit.receivers.nvml.conftest import MakeReceiver, config_issues, sim
from tests.unit.receivers.nvml.test_receiver import wait_for

# GPU 0 has two MIG instances, GPU 1 none.
NODE = {
    "gpus": [
        {"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}, {"uuid": "MIG-a2"}]},
        {"uuid": "GPU-b"},
    ]
}
WHOLE_GPU = "GPU-a"  # the MIG GPU itself
INSTANCES = {("GPU-a", "1"), ("GPU-a", "2")}
PLAIN_GPU = ("GPU-b", "")


def dcgm_devices(batch: Batch) -> set[tuple[str, str]]:
    """The devices (UUID, GPU_I_ID) with a DCGM_FI_DEV_FB_USED series in dcgm naming (it is on
    GPUs and MIG instances alike)."""
    lines = ingested(make_translator("dcgm"), SeriesStore(), batch)["DCGM_FI_DEV_FB_USED"]
    return {(labels_of(line)["UUID"], labels_of(line).get("GPU_I_ID", "")) for line in lines}


def otel_devices(batch: Batch) -> set[str]:
    lines = ingested(make_translator("otel"), SeriesStore(), batch)["hw_gpu_memory_usage_bytes"]
    return {labels_of(line)["hw_id"] for line in lines}


async def test_dcgm_naming_serves_a_mig_gpu_as_its_instances_by_default(
    make_receiver: MakeReceiver,
) -> None:
    batch = await make_receiver(simulated=NODE).scrape()

    assert dcgm_devices(batch) == INSTANCES | {PLAIN_GPU}  # the MIG GPU itself is left out


async def test_an_instance_in_its_gpus_place_carries_the_gpus_readings_as_dcgm_exporter(
    make_receiver: MakeReceiver,
) -> None:
    """DCGM answers a device-level field for a GPU instance with its GPU's value: dcgm-exporter
    serves the MIG GPU's temperature, power, clocks and XID on each instance (not its
    utilization, which MIG does not support); otel naming keeps them on the GPU alone."""
    receiver = make_receiver(simulated=NODE)
    await receiver.scrape()
    sim(receiver).inject_xid(0, 48)
    xid = receiver._xid
    assert xid is not None
    await wait_for(lambda: bool(xid.snapshot()))
    batch = await receiver.scrape()
    served = ingested(make_translator("dcgm"), SeriesStore(), batch)

    def devices(family: str) -> dict[tuple[str, str], str]:
        return {
            (labels_of(line)["UUID"], labels_of(line).get("GPU_I_ID", "")): line.split()[-1]
            for line in served.get(family, [])
        }

    gpu_level = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK")
    for family in (*gpu_level, "DCGM_FI_DEV_XID_ERRORS"):
        assert devices(family).keys() == INSTANCES | {PLAIN_GPU}, family
        first, second = (devices(family)[i] for i in sorted(INSTANCES))
        assert first == second, family  # the GPU's one reading
    assert devices("DCGM_FI_DEV_XID_ERRORS")[("GPU-a", "1")] == "48"
    assert devices("DCGM_FI_DEV_GPU_UTIL").keys() == {PLAIN_GPU}  # as under MIG: none
    assert "hw_temperature_celsius" not in {
        family
        for family, lines in ingested(make_translator("otel"), SeriesStore(), batch).items()
        for line in lines
        if 'hw_id="MIG-a1"' in line
    }


async def test_an_instance_said_gone_gets_none_of_its_gpus_readings(
    make_receiver: MakeReceiver,
) -> None:
    """A processor's gone marker for an instance (no metrics, its notes kept: hpc_jobs'
    duplicate copies, say) ends its series: it is not filled with the GPU's readings."""
    batch = await make_receiver(simulated=NODE).scrape()
    gone = tuple(
        replace(rm, metrics=()) if rm.resource.get("hw.id") == "MIG-a1" else rm for rm in batch
    )
    assert dcgm_devices(gone) == {("GPU-a", "2"), PLAIN_GPU}
    served = ingested(make_translator("dcgm"), SeriesStore(), gone)
    assert not [line for line in served["DCGM_FI_DEV_GPU_TEMP"] if 'GPU_I_ID="1"' in line]


async def test_the_gpus_readings_an_instance_carries_are_those_the_pipeline_left(
    make_receiver: MakeReceiver, telemetry: SelfTelemetry
) -> None:
    """A processor that drops the GPU's temperature drops it from its instances too: they carry
    the GPU's resource as it reaches the exporter, not a copy taken in the receiver."""
    config = FilterProcessorConfig.model_validate({"metrics": {"exclude": ["hw.temperature"]}})
    drop = FilterProcessor(make_settings("filter", Kind.PROCESSOR, telemetry), config)
    batch = drop.process(await make_receiver(simulated=NODE).scrape())
    served = ingested(make_translator("dcgm"), SeriesStore(), batch)

    assert "DCGM_FI_DEV_GPU_TEMP" not in served
    assert len(served["DCGM_FI_DEV_POWER_USAGE"]) == 3  # both instances and the plain GPU


async def test_otel_naming_serves_every_gpu_and_instance_whatever_the_choice(
    make_receiver: MakeReceiver,
) -> None:
    for choice in ("flex", "gpus", "instances", "all"):
        batch = await make_receiver(simulated=NODE, dcgm_devices=choice).scrape()
        assert otel_devices(batch) == {"GPU-a", "MIG-a1", "MIG-a2", "GPU-b"}, choice


@pytest.mark.parametrize(
    ("choice", "served"),
    [
        ("flex", INSTANCES | {PLAIN_GPU}),
        ("gpus", {(WHOLE_GPU, ""), PLAIN_GPU}),  # dcgm-exporter's -d g
        ("instances", INSTANCES),  # -d i: a GPU without MIG has no instance to serve
        ("all", INSTANCES | {(WHOLE_GPU, ""), PLAIN_GPU}),
    ],
)
async def test_dcgm_devices_chooses_dcgm_exporters_other_device_sets(
    make_receiver: MakeReceiver, choice: str, served: set[tuple[str, str]]
) -> None:
    batch = await make_receiver(simulated=NODE, dcgm_devices=choice).scrape()

    assert dcgm_devices(batch) == served


# otelgpu's own health and info families: dcgm-exporter has no field for them, so its device set
# does not govern them, and a MIG GPU's health reasons (XIDs, row remapping, slowdowns) are the
# GPU's alone.
KEPT_ON_THE_GPU = {"nvidia_gpu_up", "hw_status", "hw_gpu_info"}


async def test_a_left_out_device_keeps_only_its_health_and_info_in_dcgm_naming(
    make_receiver: MakeReceiver,
) -> None:
    """Its readings and XID series go with it (dcgm-exporter does not list the device); its
    health and info stay."""
    receiver = make_receiver(
        simulated=NODE,
        metrics={"nvidia.gpu.xid.errors": {"enabled": True}, "hw.status": {"enabled": True}},
    )
    batch = await receiver.scrape()
    served = ingested(make_translator("dcgm"), SeriesStore(), batch)

    on_the_gpu = {
        family
        for family, lines in served.items()
        for line in lines
        if labels_of(line).get("UUID") == WHOLE_GPU and not labels_of(line).get("GPU_I_ID")
    }
    assert on_the_gpu == KEPT_ON_THE_GPU


async def test_a_failed_mig_gpu_says_so_in_dcgm_naming(make_receiver: MakeReceiver) -> None:
    """An XID 79 on a MIG GPU fails the GPU: the health alerts read `nvidia_gpu_up`'s
    `hw_state` on the GPU itself, which its instances (healthy or lost) do not repeat."""
    receiver = make_receiver(simulated=NODE)
    await receiver.scrape()
    sim(receiver).inject_xid(0, 79)
    xid = receiver._xid
    assert xid is not None
    await wait_for(lambda: bool(xid.snapshot()))
    batch = await receiver.scrape()
    served = ingested(make_translator("dcgm"), SeriesStore(), batch)

    states = {
        (labels_of(line)["UUID"], labels_of(line).get("GPU_I_ID", "")): labels_of(line)["hw_state"]
        for line in served["nvidia_gpu_up"]
    }
    assert states[(WHOLE_GPU, "")] == "failed"
    assert states[PLAIN_GPU] == "ok"


@pytest.mark.parametrize(
    ("written", "error"),
    [
        ("parent", 'must be one of: flex, gpus, instances, all (got "parent")'),
        ('"g:0,1"', "'g:0,1' is dcgm-exporter's -d spelling: write gpus (GPU indexes and UUIDs "
         "go in devices:)"),
    ],
)  # fmt: skip
def test_an_unknown_choice_is_a_config_error_naming_the_valid_ones(
    tmp_path: Path, written: str, error: str
) -> None:
    path, issues = config_issues(tmp_path, f"    dcgm_devices: {written}\n")
    assert issues == [f"{path}:3:19: receivers::nvml::dcgm_devices: {error}"]
    assert NvmlReceiverConfig().dcgm_devices.value == "flex"
