"""dcgm-exporter dashboard and alert queries, run through a real Prometheus against what the nvml
receiver (simulated GPUs) and the prometheus exporter in `naming: dcgm` serve."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost, Sink
from tests.integration.test_prometheus_scrape import prometheus, running
from tests.peers.prometheus import Result, Scrape

pytestmark = pytest.mark.integration

GPU0, GPU1 = "GPU-00000000-0000-4000-8000-0000000000a0", "GPU-00000000-0000-4000-8000-0000000000a1"


async def gpu_batch(telemetry: SelfTelemetry, clock: FakeClock, sink: Sink) -> Batch:
    """Two simulated GPUs (the first with a MIG instance and an XID 48), read twice."""
    config = NvmlReceiverConfig.model_validate(
        {
            "backend": "simulated",
            "simulated": {
                "gpus": [
                    {
                        "uuid": GPU0,
                        "mig": [{"uuid": "MIG-a1", "profile": "1g.10gb"}],
                        "xid_errors": [{"code": 48}],
                    },
                    {"uuid": GPU1},
                ]
            },
        }
    )
    receiver = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, telemetry), config, sink, clock=clock
    )
    try:
        for _ in range(100):  # the XID arrives through the event thread
            batch = await receiver.scrape()
            xid = [m for rm in batch for m in rm.metrics if m.name == "nvidia.gpu.xid.errors"]
            if any(m.points for m in xid):
                return batch
            await asyncio.sleep(0.05)
        raise AssertionError("the simulated XID never arrived")
    finally:
        await receiver.shutdown()


def one(result: Result) -> tuple[dict[str, str], str]:
    assert len(result) == 1, result
    return result[0]["metric"], result[0]["value"][1]


async def test_dcgm_dashboard_queries_return_the_expected_series(
    host: FakeHost,
    telemetry: SelfTelemetry,
    clock: FakeClock,
    sink: Sink,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("K8S_NODE_NAME", "node-a")  # the DaemonSet's downward-API variable
    batch = await gpu_batch(telemetry, clock, sink)
    async with (
        running(host, naming="dcgm") as upper,
        running(host, naming="dcgm", dcgm_labels={"hostname": "hostname"}) as lower,
    ):
        await upper.consume(batch)
        await lower.consume(batch)
        scrapes = (
            Scrape(target=f"127.0.0.1:{upper.port}", job="dcgm"),
            Scrape(target=f"127.0.0.1:{lower.port}", job="dcgm_lower"),
        )
        async with prometheus(tmp_path, *scrapes) as prom:
            # 2 GPUs (the first as its MIG instance, dcgm-exporter's device set), 2 jobs
            await prom.wait_for("DCGM_FI_DEV_GPU_TEMP", lambda r: len(r) == 4)

            labels, value = one(
                await prom.query('DCGM_FI_DEV_GPU_TEMP{gpu="0", Hostname="node-a"}')
            )
            assert (labels["UUID"], labels["device"], labels["modelName"]) == (
                GPU0,
                "nvidia0",
                "NVIDIA H100 80GB HBM3",
            )
            assert value.isdigit()  # integer fields print as integers

            labels, value = one(await prom.query('DCGM_FI_DEV_GPU_UTIL{gpu="1", job="dcgm"}'))
            assert labels["Hostname"] == "node-a" and value.isdigit()
            _, value = one(await prom.query('DCGM_FI_DEV_FB_USED{gpu="1", job="dcgm"}'))
            assert value.isdigit()  # whole MiB
            _, value = one(await prom.query('DCGM_FI_DEV_MEMORY_TEMP{gpu="0", job="dcgm"}'))
            assert value.isdigit()

            # A MIG instance: its GPU's index, UUID and device, plus GPU_I_ID / GPU_I_PROFILE.
            labels, _ = one(await prom.query('DCGM_FI_DEV_FB_USED{GPU_I_ID="1", job="dcgm"}'))
            assert (labels["gpu"], labels["UUID"], labels["device"]) == ("0", GPU0, "nvidia0")
            assert labels["GPU_I_PROFILE"] == "1g.10gb"

            # XID alert queries: by code, with dcgm-exporter's text; the value is the code.
            labels, value = one(
                await prom.query('DCGM_FI_DEV_XID_ERRORS{gpu="0", err_code="48", job="dcgm"}')
            )
            assert labels["err_msg"] == "Double Bit ECC Error" and value == "48"
            # One XID series per GPU: a GPU without XIDs reads 0, "No Error" (XID panels
            # have data), so an alert on a non-zero value finds only the GPU that had one.
            labels, value = one(await prom.query('DCGM_FI_DEV_XID_ERRORS{gpu="1", job="dcgm"}'))
            assert (labels["err_code"], labels["err_msg"], value) == ("0", "No Error", "0")
            labels, _ = one(await prom.query('DCGM_FI_DEV_XID_ERRORS{job="dcgm"} != 0'))
            assert labels["gpu"] == "0"

            # dcgm_labels: {hostname: hostname} follows dcgm-exporter's later rename.
            labels, _ = one(await prom.query('DCGM_FI_DEV_GPU_TEMP{gpu="0", hostname="node-a"}'))
            assert labels["job"] == "dcgm_lower" and "Hostname" not in labels
