"""With the lean default metric set (no per-process metric on), `processes: true` still finds
a GPU process running outside its GPU's allocation: the nvml receiver, k8s_attributes and
container_env together count it in `otelgpu_gpu_processes_outside_allocation`, and no
`nvidia.gpu.process.*` series leaves the pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost, Sink
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import make_processor as make_env
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    FakePodResources,
    container,
    pod,
)
from tests.unit.processors.k8s_attributes.fakes import make_processor as make_k8s

OUTSIDE = "otelgpu_gpu_processes_outside_allocation"
SQUATTER = "a" * 64
HOLDER = "b" * 64  # train-0's trainer, which the kubelet allocated the GPU to
PID = 4242


def _host_proc(root: Path, cid: str = SQUATTER) -> Path:
    """`<root>/4242/cgroup`: the process, in containerd container `cid` ("": on the host)."""
    (root / str(PID)).mkdir()
    scope = f"/kubepods.slice/kubepods-podu2.slice/cri-containerd-{cid}.scope" if cid else "/"
    (root / str(PID) / "cgroup").write_text(f"0::{scope}\n")
    return root


def _runtime() -> FakeRuntime:
    runtime = FakeRuntime()
    runtime.sandbox("s1" * 32, "ml", "train-0")
    runtime.workload(HOLDER, "ml", "train-0", "trainer", sandbox_id="s1" * 32)
    runtime.sandbox("s2" * 32, "other", "squatter")
    runtime.workload(SQUATTER, "other", "squatter", "main", sandbox_id="s2" * 32)
    return runtime


def _gauge(telemetry: SelfTelemetry) -> list[float]:
    return [p.value for m in telemetry.collect().metrics if m.name == OUTSIDE for p in m.points]


def _names(batch: Batch) -> set[str]:
    return {m.name for rm in batch for m in rm.metrics}


@pytest.mark.parametrize(
    ("cid", "outside"),
    [(SQUATTER, 1), ("", 1), (HOLDER, 0)],
    ids=["another pod's container", "the host", "the holder's own container"],
)
async def test_a_squatter_is_counted_while_no_process_metric_is_emitted(
    telemetry: SelfTelemetry, clock: FakeClock, sink: Sink, tmp_path: Path, cid: str, outside: int
) -> None:
    gpus = [{"uuid": UUID_A, "processes": [{"pid": PID, "used_memory": "1GiB"}]}]
    host_proc = _host_proc(tmp_path, cid)
    config = {"processes": True, "host_proc": str(host_proc), "backend": "simulated"}
    receiver = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, telemetry),
        NvmlReceiverConfig.model_validate({**config, "simulated": {"gpus": gpus}}),
        sink,
        clock=clock,
    )
    pods = FakePodResources()
    pods.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    k8s = make_k8s(telemetry, pods, clock)
    env = make_env(telemetry, [(_runtime(), True)], clock)
    host = FakeHost(telemetry)
    await k8s.start(host)
    await env.start(host)
    try:
        batch = env.process(k8s.process(await receiver.scrape()))
        assert _gauge(telemetry) == [outside]
        assert "hw.gpu.utilization" in _names(batch)
        assert {n for n in _names(batch) if n.startswith("nvidia.gpu.process.")} == set()
    finally:
        await receiver.shutdown()
        await env.shutdown()
        await k8s.shutdown()
