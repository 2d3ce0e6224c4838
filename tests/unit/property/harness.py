"""The real labelling pipeline, in one process, wired to stand-ins that show the node model.

nvml receiver (simulated backend) → k8s_attributes → container_env → the prometheus exporter
twice (`naming: otel` and `naming: dcgm`) and the OTLP exporter. The stand-ins read the
`NodeModel` when asked, so a rule changes the node by changing the model:

- `NodeNvml`: the simulated NVML, with the model's processes on each GPU and its lost GPUs
  (the simulated backend loses a GPU only at a `lost_after` fixed when NVML opens; the model
  loses one at any moment, so this double answers GPU_IS_LOST for it from then on).
- `NodeKubelet`: a `PodResourcesClient` in this process (answers the model's pods; fails with
  UNAVAILABLE, or DEADLINE_EXCEEDED as a slow kubelet does, when the model says so). The wire
  (tests/peers/kubelet.py) is left out: its answers are not on the fake clock.
- `FakeRuntime` (the container_env unit tests' runtime), kept equal to the model's pods.
- a host `/proc` in a temporary directory: `<pid>/cgroup` names each process's container.

Time is a `FakeClock`: the processors' refresh loops sleep on it, `advance` runs them. One
`cycle` is one collection through every component; its output is what /metrics and OTLP carry.
"""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otelgpu.component.component import Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.exporter import ExportResponse, OtlpExporter
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.pdata.model import Batch
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.container_env.runtime import ContainerRuntime
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    ContainerAllocation,
    DeviceAllocation,
    PodAllocation,
    PodResourcesError,
)
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig, SimulatedConfig
from otelgpu.receivers.nvml.metrics import CATALOG
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.simulated import SimHandle, SimulatedNvml
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.property.node_model import (
    BY_KEY,
    DEVICES,
    GPU_COUNT,
    GPU_UUIDS,
    NodeModel,
    Pod,
)

REFRESH = 1.0  # seconds: both processors' refresh interval (the lag the checks allow)
_INTERVAL = f"{REFRESH:g}s"
NODE = "node-a"
DRA_DRIVER = "gpu.nvidia.com"
PROCESS_MEMORY = 1 << 30
# The metrics the checks read, and a few more; the rest of the default set is off, to keep a
# step cheap (the checks are per series, and rendering is most of a cycle's cost).
METRICS = frozenset(
    {
        "nvidia.gpu.up",
        "hw.status",
        "hw.gpu.utilization",
        "hw.gpu.memory.usage",
        "hw.power",
        "nvidia.gpu.xid.errors",
        "nvidia.gpu.process.memory.usage",
        "nvidia.gpu.process.utilization",
    }
)
XID_DELIVERY_TIMEOUT = 5.0  # real seconds the XID thread may take to take an injected event


def simulated_config() -> SimulatedConfig:
    """The model's topology as the simulated backend's config (GPM off: it would make the
    first collection after each start wait 0.2 s of real time)."""
    gpus: list[dict[str, Any]] = []
    for index in range(GPU_COUNT):
        migs = [
            {"uuid": d.uuid, "profile": "1g.10gb"}
            for d in DEVICES
            if d.gpu == index and d.mig_slot >= 0
        ]
        gpus.append({"uuid": GPU_UUIDS[index], "gpm": False, "mig": migs})
    return SimulatedConfig.model_validate({"gpus": gpus})


class NodeNvml(SimulatedNvml):
    """The simulated NVML showing the model's processes and lost GPUs, after every init too."""

    def __init__(self, model: NodeModel, clock: FakeClock) -> None:
        super().__init__(simulated_config(), clock.monotonic)
        self._model = model

    def init(self) -> None:
        super().init()
        self.sync()

    def sync(self) -> None:
        """Puts the model's processes on the simulated GPUs."""
        if self.calls["nvmlInit"] == 0:
            return
        by_gpu: dict[int, list[tuple[int, int]]] = {i: [] for i in range(GPU_COUNT)}
        for process in sorted(self._model.processes.values(), key=lambda p: p.pid):
            by_gpu[BY_KEY[process.device].gpu].append((process.pid, PROCESS_MEMORY))
        for index, processes in by_gpu.items():
            self.set_processes(index, processes)

    def _gpu(self, handle: SimHandle, call: str) -> Any:
        if handle.gpu in self._model.lost:
            self.calls[call] += 1
            raise NvmlError(nvml.ERROR_GPU_IS_LOST, "GPU is lost")
        return super()._gpu(handle, call)


class NodeKubelet:
    """A `PodResourcesClient` answering the model's pods as the kubelet lists them."""

    def __init__(self, model: NodeModel, clock: FakeClock) -> None:
        self._model = model
        self._clock = clock
        self.calls = 0
        # pod name → what the last answer listed; None: no answer since k8s_attributes started
        self.last: dict[str, PodAllocation] | None = {}

    def asker_restarted(self) -> None:
        """A fresh k8s_attributes asks from now on (a reload). What its first answer lists, it
        has seen listed since always (`notes.HOLDERS_CHANGED` -inf): that answer may have come
        only after failures, and stale, so a change the kubelet made before it is one this
        k8s_attributes never saw."""
        self.last = None

    async def list(self) -> tuple[PodAllocation, ...]:
        self.calls += 1
        if self._model.kubelet == "error":
            raise PodResourcesError("UNAVAILABLE", "connection refused")
        if self._model.kubelet == "slow":
            raise PodResourcesError("DEADLINE_EXCEEDED", "no answer in time")
        pods = self._model.kubelet_pods()
        listed = {pod.name: pod_allocation(pod) for pod in pods}
        if self.last is None:
            for name in listed:
                self._model.kubelet_changed_at[name] = float("-inf")
        else:
            for name in listed.keys() | self.last.keys():
                if listed.get(name) != self.last.get(name):
                    self._model.kubelet_changed_at[name] = self._clock.now
        self.last = listed
        self._model.kubelet_answered = pods
        return tuple(listed.values())

    async def allocatable(self) -> tuple[DeviceAllocation, ...] | None:
        if self._model.kubelet != "ok":
            raise PodResourcesError("UNAVAILABLE", "connection refused")
        by_resource: dict[str, list[str]] = {}
        for device in DEVICES:
            by_resource.setdefault(device.resource_name, []).append(device.uuid)
        return tuple(DeviceAllocation(r, tuple(ids)) for r, ids in sorted(by_resource.items()))

    async def close(self) -> None:
        pass


def pod_allocation(pod: Pod) -> PodAllocation:
    """One pod as pod-resources `List` reports it."""
    containers = []
    for c in pod.containers:
        devices: dict[str, list[str]] = {}
        claims: list[ClaimDevice] = []
        for grant in c.grants:
            device = BY_KEY[grant.device]
            if grant.form == "uuid":
                devices.setdefault(device.resource_name, []).append(device.uuid)
            elif grant.form == "replica":
                devices.setdefault(device.resource_name, []).append(f"{device.uuid}::{grant.tag}")
            else:
                claims.append(
                    ClaimDevice(
                        driver=DRA_DRIVER,
                        pool=NODE,
                        device=device.dra_name,
                        share_id=grant.tag if grant.form == "dra_share" else "",
                        claim_namespace=pod.namespace,
                        claim_name=f"{pod.name}-{c.name}-{grant.device}",
                    )
                )
        allocations = tuple(DeviceAllocation(r, tuple(ids)) for r, ids in devices.items())
        containers.append(ContainerAllocation(c.name, allocations, tuple(claims)))
    return PodAllocation(pod.namespace, pod.name, tuple(containers))


class NodeRuntime:
    """Keeps a `FakeRuntime` equal to the model: live pods the runtime lists run, deleted pods'
    records stay stopped (as containerd keeps them for a while)."""

    def __init__(self, model: NodeModel, clock: FakeClock) -> None:
        self.runtime = FakeRuntime("containerd")
        self._model = model
        self._clock = clock
        self._born: dict[str, float] = {}

    def sync(self) -> None:
        runtime = self.runtime
        runtime.up = self._model.runtime_up
        live: set[str] = set()
        for pod in self._model.pods.values():
            if not pod.in_runtime:
                continue
            created = self._born.setdefault(pod.sandbox, self._clock.now)
            live.add(pod.sandbox)
            if pod.sandbox not in runtime.refs:
                runtime.sandbox(
                    pod.sandbox,
                    pod.namespace,
                    pod.name,
                    labels={"app": pod.app},
                    created=created,
                    uid=pod.uid,
                )
            for c in pod.containers:
                live.add(c.cid)
                if c.cid not in runtime.refs:
                    runtime.workload(
                        c.cid,
                        pod.namespace,
                        pod.name,
                        c.name,
                        env={"TEAM": c.team, "PATH": "/usr/bin"},
                        created=created,
                        sandbox_id=pod.sandbox,
                        uid=pod.uid,
                    )
        for ref in list(runtime.refs.values()):
            if ref.id not in live and ref.running:
                runtime.stop(ref.id)


class HostProc:
    """A host `/proc` holding `<pid>/cgroup` for each GPU process of the model."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="otelgpu-proc-"))

    def sync(self, model: NodeModel) -> None:
        wanted = {str(pid) for pid in model.processes}
        for entry in self.root.iterdir():
            if entry.name not in wanted:
                shutil.rmtree(entry)
        for process in model.processes.values():
            folder = self.root / str(process.pid)
            if folder.exists():
                continue
            folder.mkdir()
            if process.cid:
                found = model.container(process.cid)
                uid = found[0].uid if found else "0"
                path = f"/kubepods.slice/kubepods-pod{uid}.slice/cri-containerd-{process.cid}.scope"
            else:
                path = "/system.slice/sshd.service"
            (folder / "cgroup").write_text(f"0::{path}\n")

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class RecordingTransport:
    """An OTLP transport that keeps every request it is given."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.arrived = asyncio.Event()

    async def open(self) -> None:
        pass

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        self.requests.append(request)
        self.arrived.set()
        return ExportResponse()

    async def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Output:
    """What one cycle put on the wire: both /metrics bodies and the OTLP request."""

    otel: str
    dcgm: str
    otlp: ExportMetricsServiceRequest
    batch: Batch


class Pipeline:
    """One service's worth of components; `reload` builds fresh ones as SIGHUP does."""

    def __init__(self, model: NodeModel, clock: FakeClock) -> None:
        self.model = model
        self.clock = clock
        self.telemetry = SelfTelemetry()
        self.host = FakeHost(self.telemetry)
        self.kubelet = NodeKubelet(model, clock)
        self.runtime = NodeRuntime(model, clock)
        self.proc = HostProc()
        self.nvml: NodeNvml | None = None
        self._parts: _Parts | None = None

    async def start(self) -> None:
        self.sync()
        self.nvml = NodeNvml(self.model, self.clock)
        self._parts = await _Parts.start(self)

    async def reload(self) -> None:
        """Stops every component and starts fresh ones on the same node (a SIGHUP)."""
        parts, self._parts = self._parts, None
        if parts is not None:
            await parts.shutdown()
        self.kubelet.asker_restarted()
        await self.start()

    async def shutdown(self) -> None:
        parts, self._parts = self._parts, None
        if parts is not None:
            await parts.shutdown()
        self.proc.close()

    def sync(self) -> None:
        """Shows the model's current state through every stand-in."""
        self.runtime.sync()
        self.proc.sync(self.model)
        if self.nvml is not None:
            self.nvml.sync()

    async def inject_xid(self, gpu: int, code: int) -> None:
        """An XID on GPU `gpu`, waited for until the receiver's XID thread took it."""
        assert self.nvml is not None
        if self._parts is None or self._parts.receiver_opened is False:
            return
        before = self.nvml.calls["nvmlEventSetWait"]
        self.nvml.inject_xid(gpu, code)
        deadline = time.monotonic() + XID_DELIVERY_TIMEOUT
        while self.nvml.calls["nvmlEventSetWait"] < before + 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def advance(self, seconds: float) -> None:
        await self.clock.advance(seconds)

    async def cycle(self) -> Output:
        assert self._parts is not None
        self.sync()
        return await self._parts.cycle()


class _Parts:
    """The components of one service."""

    def __init__(self, pipeline: Pipeline) -> None:
        telemetry = pipeline.telemetry

        def settings(id: str, kind: Kind) -> Settings:
            return make_settings(id, kind, telemetry)

        receiver_config = NvmlReceiverConfig.model_validate(
            {
                "backend": "simulated",
                "processes": True,
                "host_proc": str(pipeline.proc.root),
                "collection_interval": _INTERVAL,
                "metrics": {
                    spec.name: {"enabled": spec.name in METRICS}
                    for spec in CATALOG
                    if spec.enabled != (spec.name in METRICS)
                },
            }
        )
        assert pipeline.nvml is not None
        self.receiver = NvmlReceiver(
            settings("nvml", Kind.RECEIVER),
            receiver_config,
            _NoConsumer(),
            client=pipeline.nvml,
            clock=pipeline.clock,
        )
        self.k8s = K8sAttributesProcessor(
            settings("k8s_attributes", Kind.PROCESSOR),
            K8sAttributesProcessorConfig.model_validate(
                {"refresh_interval": _INTERVAL, "timeout": _INTERVAL, "node_name": NODE}
            ),
            client=pipeline.kubelet,
            clock=pipeline.clock,
            environ={},
            rng=random.Random(7),
        )
        runtime: ContainerRuntime = pipeline.runtime.runtime

        def runtimes(_: ContainerEnvProcessorConfig) -> Sequence[tuple[ContainerRuntime, bool]]:
            return [(runtime, True)]

        self.container_env = ContainerEnvProcessor(
            settings("container_env", Kind.PROCESSOR),
            ContainerEnvProcessorConfig.model_validate(
                {
                    "runtime": "containerd",
                    "refresh_interval": _INTERVAL,
                    "timeout": _INTERVAL,
                    "env": {"include": ["TEAM"]},
                    "pod_labels": {"include": ["app"]},
                    "owners": False,
                }
            ),
            runtimes,
            clock=pipeline.clock,
        )
        self.otel = PrometheusExporter(
            settings("prometheus/otel", Kind.EXPORTER),
            PrometheusExporterConfig.model_validate({"naming": "otel"}),
            clock=pipeline.clock.monotonic,
        )
        self.dcgm = PrometheusExporter(
            settings("prometheus/dcgm", Kind.EXPORTER),
            PrometheusExporterConfig.model_validate({"naming": "dcgm"}),
            clock=pipeline.clock.monotonic,
        )
        self.transport = RecordingTransport()
        self.otlp = OtlpExporter(
            settings("otlp", Kind.EXPORTER),
            OtlpExporterConfig.model_validate({"endpoint": "localhost:4317"}),
            self.transport,
        )
        self.receiver_opened = False

    @classmethod
    async def start(cls, pipeline: Pipeline) -> _Parts:
        parts = cls(pipeline)
        host = pipeline.host
        await parts.otlp.start(host)
        await parts.container_env.start(host)
        await parts.k8s.start(host)
        return parts

    async def cycle(self) -> Output:
        batch = await self.receiver.scrape()
        self.receiver_opened = True
        batch = self.k8s.process(batch)
        batch = self.container_env.process(batch)
        for exporter in (self.otel, self.dcgm):
            await exporter.consume(batch)
            await exporter.refresh()
        self.transport.arrived.clear()
        await self.otlp.consume(batch)
        if batch:
            async with asyncio.timeout(5.0):
                await self.transport.arrived.wait()
        raw = self.transport.requests[-1] if batch and self.transport.requests else b""
        self.transport.requests.clear()
        return Output(
            otel=self.otel.body.text().decode(),
            dcgm=self.dcgm.body.text().decode(),
            otlp=ExportMetricsServiceRequest.FromString(raw),
            batch=batch,
        )

    async def shutdown(self) -> None:
        await self.receiver.shutdown()
        await self.k8s.shutdown()
        await self.container_env.shutdown()
        await self.otlp.shutdown()
        await self.otel.shutdown()
        await self.dcgm.shutdown()


class _NoConsumer:
    """The receiver's `next`: unused, the harness drives `scrape` itself."""

    async def consume(self, batch: Batch) -> None:
        pass


def quiet_logs() -> None:
    """The components log every state change; hundreds of examples make that noise."""
    logging.getLogger("otelgpu").setLevel(logging.ERROR)
