"""P8: the downstream bill of the default pipeline, vs dcgm-exporter's default counters.

For a described node (bench/node_fixture.py: `--gpus`, `--mig-gpus` with `--mig-per-gpu`
instances each, `--pods`, `--procs` per device, business labels `--env` / `--pod-labels`) the
agent's pipeline runs in this process, once per naming, with the real components: the nvml
receiver on the simulated backend (`processes: true`, as the DaemonSet's pipeline), the
`k8s_attributes` and `container_env` processors fed by the in-memory pod-resources and runtime
fakes P2 uses, a `resource` processor that only makes the simulated GPUs look real (drops
`otelgpu.simulated`, sets `host.name` to the node name), the `prometheus` exporter (`naming:
otel`, then `naming: dcgm`) and the OTLP encoder (`otelgpu/exporters/otlp/encode.py`). The
agent's own metrics are served where the Helm chart serves them by default
(deploy/helm/otelgpu/values.yaml, `telemetry`): on the telemetry endpoint, read as the
service's pull reader reads them (`otelgpu/service/telemetry_endpoint.py`), and not in the
exporter's body; `--telemetry-beside` keeps them in it (`telemetry.ownPort: false`). So is the
GPU status (values.yaml, `gpuStatus`): the health metrics leave the GPU pipeline through the
`filter` processor and reach a second prometheus exporter, the status endpoint, unenriched,
which writes the devices' `hw_gpu_info` too (the GPU endpoint's exporter has `device_info:
false`), as the chart's pipeline does; `--status-beside` keeps them on the GPU endpoint
(`gpuStatus.ownPort: false`).

Per side it prints the series per node (those naming a GPU, per GPU, and the agent's own; for
ours, one GPU's series parted into those that carry a reading dcgm-exporter has a field for and
those only this agent serves: `up`, `hw.status`, the info series, the allocation series), the
bytes of one scrape of the GPU endpoint (the classic text body, plain and gzip; on the wire
ours is gzipped for a scraper that asks, dcgm-exporter's is always plain) and of the telemetry
endpoint, the mean length of a series line, and OTLP bytes per minute (one collection's
request, gzipped at level 6 as `otlp_http` sends it, times the collections a minute holds at
the receiver's default `collection_interval`). dcgm-exporter's figures are computed from its
published CSV and render template for the same devices, holders, labels and readings (each
field's value is the one the agent's `naming: dcgm` body holds for that device;
bench/dcgm_default_counters.py says how). Then the `naming: dcgm` bill itemised: the series
that carry one of dcgm-exporter's fields (`DCGM_FI_*`) against its series, and every other
family with its count, what it is for (as docs/migrating-from-dcgm-exporter.md, "What otelgpu
serves beyond dcgm-exporter's series", lists it; a family missing there is NOT ITEMISED) and
the endpoint that serves it. Then the 10,000-node fleet: active series (both endpoints),
samples per second at a 15 s scrape, and ingest bytes per second.

    python bench/fleet_cost.py [--gpus 8] [--mig-gpus 0] [--mig-per-gpu 3] [--pods 100]
                               [--procs 1] [--env TEAM,PROJECT] [--pod-labels app]
                               [--metric-set default|all] [--enable NAME,...] [--nodes 10000]
                               [--telemetry-beside] [--status-beside]
    python bench/fleet_cost.py --smoke      # a 2-GPU node, seconds

Target (TARGETS.md P8): `naming: dcgm`: dcgm-equivalent series <= 1.0x dcgm-exporter's and
bytes per such series line <= 1.0x, every other series itemised; `naming: otel`: the GPU
endpoint's series <= 1.1x dcgm-exporter's (the agent's own, on the telemetry endpoint, and the
GPU status, on the status endpoint, are printed beside). The verdict is the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gzip
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from bench import dcgm_default_counters as dcgm
from bench.node_fixture import MIG_PROFILE, Node, gpu_uuid, mig_uuid
from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes
from otelgpu.exporters.otlp.resource import service_attributes
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.filter.config import FilterProcessorConfig
from otelgpu.processors.filter.factory import FilterProcessor
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.processors.resource.factory import ResourceProcessor, ResourceProcessorConfig
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.dcgm_names import NAMING
from otelgpu.receivers.nvml.metrics import HEALTH_METRICS
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.service.telemetry_endpoint import exposition
from tests.fakes import FakeHost, Sink
from tests.unit.processors.k8s_attributes.fakes import (
    FakePodResources,
    allocatable,
    container,
    pod,
)

NODE_NAME = "gpu-node-0001"
OTLP_GZIP_LEVEL = 6  # otlp_http's level
SCRAPE_INTERVAL = 15.0
DCGM_PREFIX = "DCGM_FI_"  # a series with one of dcgm-exporter's fields, in naming dcgm
AGENT_PREFIX = "otelgpu_"  # the agent's own series (some name a GPU: they are still its own)
_DEVICE = re.compile(r"(?:GPU|MIG)-b3c40000-[0-9a-f-]{27,}")  # node_fixture's UUIDs
CHART_VALUES = Path(__file__).resolve().parents[1] / "deploy/helm/otelgpu/values.yaml"


# The GPU status families: health (`nvidia_gpu_up`, `hw_status`) and info (`hw_gpu_info`), the
# same names in both namings; on the status endpoint in the chart (values.yaml, gpuStatus).
STATUS_FAMILIES = ("nvidia_gpu_up", "hw_status", "hw_gpu_info")


@dataclass(frozen=True)
class Endpoints:
    """Where the chart serves what, by default: the GPU endpoint's port, the telemetry port
    the agent's own metrics move to, and the status port the GPU status moves to (None: they
    stay on the GPU endpoint)."""

    gpu: int
    telemetry: int | None
    status: int | None = None

    @classmethod
    def chart_default(cls) -> Endpoints:
        values = yaml.safe_load(CHART_VALUES.read_text())
        own, status = values["telemetry"], values["gpuStatus"]
        return cls(
            values["service"]["port"],
            own["port"] if own["ownPort"] else None,
            status["port"] if status["ownPort"] else None,
        )

    def of(self, family: str) -> str:
        """Which endpoint serves `family`."""
        if family.startswith(AGENT_PREFIX) and self.telemetry is not None:
            return f"telemetry endpoint :{self.telemetry}"
        if family in STATUS_FAMILIES and self.status is not None:
            return f"GPU status endpoint :{self.status}"
        return f"GPU endpoint :{self.gpu}"


@dataclass(frozen=True)
class Figures:
    """One side's bill for the node."""

    who: str
    per_gpu: list[int]  # series naming each GPU (its MIG instances, processes, holders)
    agent: int  # the agent's own series (`otelgpu_*`), on whichever endpoint serves them
    plain: int  # the GPU endpoint's body
    gzipped: int
    served_gzip: bool
    line: float  # mean bytes of a series line of the GPU endpoint, newline included
    otlp_minute: int | None  # gzipped OTLP bytes a minute
    items: str = ""  # one GPU's series: those with dcgm-exporter's readings, and the others
    families: dict[str, int] = dataclasses.field(
        default_factory=dict
    )  # series per family, both endpoints
    apart: int = 0  # series on the telemetry endpoint
    apart_plain: int = 0  # its body's bytes
    equivalent_line: float = 0.0  # mean bytes of a line with a dcgm-exporter field (DCGM_FI_*)
    status: int = 0  # series on the GPU status endpoint (counted in per_gpu too)
    status_plain: int = 0  # its body's bytes
    status_gzip: int = 0  # and gzipped, as served

    @property
    def series(self) -> int:
        return sum(self.per_gpu) + self.agent

    @property
    def on_gpu_endpoint(self) -> int:
        return self.series - self.apart - self.status

    @property
    def wire(self) -> int:
        """Bytes a scrape of the GPU series takes: the GPU endpoint's, and the GPU status
        endpoint's where it is apart."""
        return (self.gzipped if self.served_gzip else self.plain) + self.status_gzip


def _settings(name: str, kind: Kind, telemetry: SelfTelemetry) -> Settings:
    # the naming table the agent's graph hands every component: the nvml receiver's dcgm names
    return Settings.for_component(ComponentID(name), kind, telemetry, naming=NAMING)


def _filter(name: str, rule: str, telemetry: SelfTelemetry) -> FilterProcessor:
    """The chart's filter/gpu_status (`include` the health metrics) or filter/not_gpu_status
    (`exclude` them)."""
    config = FilterProcessorConfig.model_validate({"metrics": {rule: sorted(HEALTH_METRICS)}})
    return FilterProcessor(_settings(name, Kind.PROCESSOR, telemetry), config)


class Pipeline:
    """receiver → k8s_attributes → container_env → resource → prometheus (one naming); with
    the GPU status apart (the chart's pipeline, values.yaml `gpuStatus`), the health metrics go
    instead from the receiver to a second prometheus exporter."""

    def __init__(
        self,
        node: Node,
        host_proc: Path,
        naming: str,
        args: argparse.Namespace,
        apart: bool,
        status_apart: bool = False,
    ) -> None:
        telemetry = SelfTelemetry()
        # as the service does with a pull reader (the chart's default): the exporter's body
        # then holds no self-telemetry, `exposition` serves it
        telemetry.pulled_apart(apart)
        self.telemetry = telemetry
        self.host = FakeHost(telemetry)
        # the default metric set, driven by hand after the first collection
        receiver = node.receiver_config(host_proc, "1h", process_metrics=False)
        receiver["metric_set"] = args.metric_set
        receiver["metrics"] = {name: {"enabled": True} for name in args.enable}
        self.config = NvmlReceiverConfig.model_validate(receiver)
        self.sink = Sink()
        self.receiver = NvmlReceiver(
            _settings("nvml", Kind.RECEIVER, telemetry), self.config, self.sink
        )
        pods = FakePodResources()
        listed = node.pod_devices()
        pods.set(*(pod(ns, n, container("main", d), container("sidecar")) for ns, n, d in listed))
        pods.devices = allocatable(node.allocatable())
        self.k8s = K8sAttributesProcessor(
            _settings("k8s_attributes", Kind.PROCESSOR, telemetry),
            K8sAttributesProcessorConfig.model_validate({"node_name": NODE_NAME}),
            client=pods,
        )
        runtime = node.fake_runtime()
        includes = {"env": {"include": args.env}, "pod_labels": {"include": args.pod_labels}}
        self.env = ContainerEnvProcessor(
            _settings("container_env", Kind.PROCESSOR, telemetry),
            ContainerEnvProcessorConfig.model_validate({"runtime": "containerd", **includes}),
            lambda _config: [(runtime, True)],
        )
        self.resource = ResourceProcessor(
            _settings("resource", Kind.PROCESSOR, telemetry),
            ResourceProcessorConfig.model_validate(
                {
                    "attributes": [
                        {"key": semconv.SIMULATED, "action": "delete"},
                        {"key": semconv.HOST_NAME, "action": "upsert", "value": NODE_NAME},
                    ]
                }
            ),
        )
        exporter = {"endpoint": "127.0.0.1:0", "naming": naming}
        self.prometheus = PrometheusExporter(
            _settings("prometheus", Kind.EXPORTER, telemetry),
            PrometheusExporterConfig.model_validate(
                {**exporter, "device_info": False} if status_apart else exporter
            ),
        )
        self.status: PrometheusExporter | None = None
        self.readings = _filter("filter/not_gpu_status", "exclude", telemetry)
        self.health = _filter("filter/gpu_status", "include", telemetry)
        if status_apart:
            self.status = PrometheusExporter(
                _settings("prometheus/gpu_status", Kind.EXPORTER, telemetry),
                PrometheusExporterConfig.model_validate(exporter),
            )

    async def start(self) -> None:
        # the agent's order (otelgpu/service/graph.py `start_order`): downstream first
        await self.prometheus.start(self.host)
        if self.status is not None:
            await self.status.start(self.host)
        await self.env.start(self.host)
        await self.k8s.start(self.host)
        await self.receiver.start(self.host)
        deadline = time.monotonic() + 120
        while self.k8s.snapshot is None or not self.sink.batches:  # both first answers in
            if time.monotonic() > deadline:
                raise RuntimeError("the first collection or the pod-resources answer never came")
            await asyncio.sleep(0.01)

    async def shutdown(self) -> None:
        await self.receiver.shutdown()
        await self.k8s.shutdown()
        await self.env.shutdown()
        await self.prometheus.shutdown()
        if self.status is not None:
            await self.status.shutdown()

    async def cycle(self) -> Batch:
        """One collection through every stage; the exporters' bodies are rendered from it.
        Returns the whole batch as the processors leave it (OTLP's, and the readings
        dcgm-exporter's side gets)."""
        read = await self.receiver.scrape()
        batch = self.resource.process(self.env.process(self.k8s.process(read)))
        if self.status is None:
            await self.prometheus.consume(batch)
            await self.prometheus.refresh()
            return batch
        await self.prometheus.consume(self.readings.process(batch))
        await self.prometheus.refresh()
        # unenriched, as the chart's metrics/gpu_status pipeline; `resource` only makes the
        # simulated GPUs look real, so it applies here too
        await self.status.consume(self.resource.process(self.health.process(read)))
        await self.status.refresh()
        return batch


def _gpu_index(node: Node) -> dict[str, int]:
    """Every device UUID of the node → the index of its GPU."""
    found = {gpu_uuid(i): i for i in range(node.gpus)}
    for i in range(node.mig_gpus):
        found |= {mig_uuid(i, slot): i for slot in range(node.mig_per_gpu)}
    return found


# The GPU series only this agent serves (same family names in both namings): its health (on
# `up` by default; `hw_status` when switched on), the device's static facts, and who holds the
# GPU. Every other GPU series carries a reading that dcgm-exporter has a field for.
ONLY_OURS = ("nvidia_gpu_up", "hw_status", "hw_gpu_info", "nvidia_gpu_allocation_ratio")


def itemise(text: str, uuid: str) -> tuple[int, dict[str, int]]:
    """The series naming the device `uuid`: (how many carry dcgm-exporter's readings, how many
    of each family only ours has)."""
    theirs, ours = 0, dict.fromkeys(ONLY_OURS, 0)
    for line in text.splitlines():
        if line and not line.startswith("#") and uuid in line:
            family = line.split("{", 1)[0]
            if family in ours:
                ours[family] += 1
            elif not family.startswith(AGENT_PREFIX):
                theirs += 1
    return theirs, ours


def count_series(text: str, node: Node) -> tuple[list[int], int, float]:
    """(series per GPU, series naming no GPU, mean series line bytes) of a text body."""
    index = _gpu_index(node)
    per_gpu = [0] * node.gpus
    agent = length = 0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        length += len(line.encode()) + 1
        found = None if line.startswith(AGENT_PREFIX) else _DEVICE.search(line)
        if found is None:
            agent += 1
        else:
            per_gpu[index[found.group(0)]] += 1
    series = sum(per_gpu) + agent
    return per_gpu, agent, length / max(series, 1)


def mean_line(text: str, prefix: str) -> float:
    """Mean bytes (newline included) of the series lines whose family starts with `prefix`."""
    sizes = [len(line.encode()) + 1 for line in text.splitlines() if line.startswith(prefix)]
    return sum(sizes) / len(sizes) if sizes else 0.0


def families_of(text: str) -> dict[str, int]:
    """Series per family of a text body, in the order they come."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            found[name] = found.get(name, 0) + 1
    return found


async def ours(
    node: Node, naming: str, args: argparse.Namespace, where: Endpoints
) -> tuple[Figures, Batch, str]:
    """Our bill: the GPU endpoint's body (`text`, returned) and, when `where` moves them, the
    agent's own metrics as the telemetry endpoint serves them."""
    apart = where.telemetry is not None
    with tempfile.TemporaryDirectory(prefix="p8-proc-") as proc_dir:
        host_proc = node.write_host_proc(Path(proc_dir))
        pipe = Pipeline(node, host_proc, naming, args, apart, where.status is not None)
        await pipe.start()
        try:
            await pipe.cycle()  # GPM's rates need a sample a cycle back: count the second
            batch = await pipe.cycle()
            body = pipe.prometheus.body
            plain = body.text()
            own = exposition(pipe.telemetry).decode() if apart else ""
            status, status_gzip = "", 0
            if pipe.status is not None:
                status, status_gzip = (
                    pipe.status.body.text().decode(),
                    len(pipe.status.body.gzipped),
                )
        finally:
            await pipe.shutdown()
    text = plain.decode()
    per_gpu, agent, line = count_series(text, node)
    if status:  # the status endpoint's series name a GPU each
        per_gpu = [a + b for a, b in zip(per_gpu, count_series(status, node)[0], strict=True)]
    apart_series = sum(families_of(own).values())
    fields, extras = itemise(text + status, gpu_uuid(0))
    items = (
        f"ours, naming {naming}, GPU 0: {sum(extras.values()) + fields} series ="
        f" {fields} with dcgm-exporter's readings + {sum(extras.values())} only ours ("
        + ", ".join(f"{name} {count}" for name, count in extras.items() if count)
        + ")"
    )
    otlp = None
    if naming == "otel":  # OTLP does not depend on the Prometheus naming
        cache = AttributeCache(resource_defaults=service_attributes(os.environ))
        request = gzip.compress(encode_bytes(batch, cache), OTLP_GZIP_LEVEL, mtime=0)
        otlp = round(len(request) * 60 / NvmlReceiverConfig().collection_interval)
    figures = Figures(
        f"ours, naming {naming}",
        per_gpu,
        agent + apart_series,
        len(plain),
        len(body.gzipped),
        True,
        line,
        otlp,
        items,
        families_of(text + status + own),
        apart_series,
        len(own.encode()),
        mean_line(text, DCGM_PREFIX),
        sum(families_of(status).values()),
        len(status.encode()),
        status_gzip,
    )
    return figures, batch, text


_DCGM_LINE = re.compile(r"^(DCGM_FI_[A-Z0-9_]+)\{(.*)\} (\S+)$", re.M)
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')


def readings_of(text: str) -> dcgm.Readings:
    """Each device's readings in a `naming: dcgm` body: (UUID, GPU_I_ID) → field → value (the
    XID gauge left out: it holds a code, and dcgm-exporter's is 0 before any XID)."""
    found: dict[tuple[str, str], dict[str, float]] = {}
    for field, labels, value in _DCGM_LINE.findall(text):
        if field == "DCGM_FI_DEV_XID_ERRORS":
            continue
        named = dict(_LABEL.findall(labels))
        found.setdefault((named["UUID"], named.get("GPU_I_ID", "")), {})[field] = float(value)
    return found


def dcgm_devices(node: Node, batch: Batch, args: argparse.Namespace) -> list[dcgm.Device]:
    """The devices dcgm-exporter lists on the node, labelled from the same GPUs and holders."""
    gpus = {rm.resource[semconv.HW_ID]: rm.resource for rm in batch}
    holders = {h.device_ids[0]: h for h in node.holders()}
    devices = []
    for i in range(node.gpus):
        facts = gpus[gpu_uuid(i)]
        common = (i, gpu_uuid(i), str(facts[semconv.GPU_PCI_BUS_ID]), str(facts[semconv.HW_MODEL]))
        mig = node.mig_per_gpu if i < node.mig_gpus else 0
        ids = [mig_uuid(i, slot) for slot in range(mig)] or [gpu_uuid(i)]
        for slot, device_id in enumerate(ids):
            holder = holders.get(device_id)
            labels = (
                {f"env_{k}": v for k, v in holder.env().items() if k in args.env} if holder else {}
            )
            if holder:
                labels |= {
                    re.sub(r"[^a-zA-Z0-9_]", "_", k): v
                    for k, v in holder.pod_labels().items()
                    if k in args.pod_labels
                }
            devices.append(
                dcgm.Device(
                    *common,
                    mig=(MIG_PROFILE, str(slot + 1)) if mig else None,
                    holder=(holder.namespace, holder.pod, "main") if holder else None,
                    labels=labels,
                )
            )
    return devices


def theirs(node: Node, batch: Batch, args: argparse.Namespace, readings: dcgm.Readings) -> Figures:
    """dcgm-exporter's bill for the node, its devices carrying `readings` (what the agent read
    from the same GPUs, in dcgm-exporter's units)."""
    driver = str(batch[0].resource[semconv.HW_DRIVER_VERSION])
    body, _ = dcgm.render(dcgm_devices(node, batch, args), NODE_NAME, driver, readings)
    per_gpu, agent, line = count_series(body.decode(), node)
    return Figures(
        "dcgm-exporter",
        per_gpu,
        agent,
        len(body),
        len(dcgm.gzipped(body)),
        False,
        line,
        None,
        equivalent_line=mean_line(body.decode(), DCGM_PREFIX),
    )


def _each(per_gpu: Sequence[int]) -> str:
    low, high = min(per_gpu), max(per_gpu)
    return f"{low} each" if low == high else f"{low} to {high} each"


def describe(f: Figures, gpus: int, where: Endpoints) -> str:
    otlp = f"{f.otlp_minute} B/min gzip" if f.otlp_minute is not None else "none"
    served = "gzip" if f.served_gzip else "plain"
    apart = (
        f"; {f.apart} on the telemetry endpoint :{where.telemetry}, {f.apart_plain} B plain"
        if f.apart
        else ""
    )
    if f.status:
        apart += (
            f"; {f.status} on the GPU status endpoint :{where.status}, {f.status_plain} B plain,"
            f" {f.status_gzip} B gzip"
        )
    return (
        f"{f.who}: series {f.series} = {sum(f.per_gpu)} on {gpus} GPUs ({_each(f.per_gpu)})"
        f" + {f.agent} agent; GPU endpoint scrape {f.plain} B plain, {f.gzipped} B gzip,"
        f" served {served};"
        f" {f.line:.1f} B per series line; OTLP {otlp}{apart}"
    )


def ratios(mine: Figures, base: Figures) -> dict[str, float]:
    """Ours over dcgm-exporter's; per dcgm-equivalent line only where ours has such lines."""
    equivalent = mine.equivalent_line / base.equivalent_line
    return {
        "series": mine.series / base.series,
        "GPU endpoint series": mine.on_gpu_endpoint / base.series,
        "GPU series": sum(mine.per_gpu) / sum(base.per_gpu),
        "plain": mine.plain / base.plain,
        "gzip": mine.gzipped / base.gzipped,
        "wire": mine.wire / base.wire,
        "line": mine.line / base.line,
    } | ({"dcgm-equivalent line": equivalent} if equivalent else {})


MIGRATING = Path(__file__).resolve().parents[1] / "docs/migrating-from-dcgm-exporter.md"
EXTRAS_HEADING = "## What otelgpu serves beyond dcgm-exporter's series"
_ROW = re.compile(r"^\| `([A-Za-z_:*]+)` \| ([^|:]+):", re.M)


def itemised_in_docs() -> dict[str, str]:
    """The families docs/migrating-from-dcgm-exporter.md itemises as served beyond
    dcgm-exporter's series (`otelgpu_*`: a prefix), each with what it is for."""
    text = MIGRATING.read_text()
    section = text.split(EXTRAS_HEADING, 1)[1].split("\n## ", 1)[0]
    return {name: what.strip() for name, what in _ROW.findall(section)}


def item_of(family: str, items: dict[str, str]) -> str | None:
    """What an itemised family is for; None for one the docs do not list."""
    for name, what in items.items():
        if family == name or (name.endswith("*") and family.startswith(name[:-1])):
            return what
    return None


@dataclass(frozen=True)
class Itemised:
    """A `naming: dcgm` bill against dcgm-exporter's: its series with dcgm-exporter's fields,
    and every other family, with what it is for (None: not itemised) and where it is served."""

    equivalent: int
    extras: list[tuple[str, str | None, int, str]]  # (family, what, series, endpoint)

    @property
    def all_itemised(self) -> bool:
        return all(what is not None for _, what, _, _ in self.extras)


def itemise_node(families: dict[str, int], where: Endpoints) -> Itemised:
    items = itemised_in_docs()
    equivalent = sum(n for name, n in families.items() if name.startswith(DCGM_PREFIX))
    extras = [
        (name, item_of(name, items), n, where.of(name))
        for name, n in families.items()
        if not name.startswith(DCGM_PREFIX)
    ]
    return Itemised(equivalent, extras)


def itemised_lines(got: Itemised, base: Figures) -> list[str]:
    """The itemised difference, one family a line; the agent's own in one line."""
    out = [
        "ours, naming dcgm, itemised against dcgm-exporter's"
        f" {base.series} series (where the chart serves each by default):",
        f"  dcgm-equivalent (DCGM_FI_*): {got.equivalent} series,"
        f" {got.equivalent / base.series:.2f}x",
    ]
    own = [(n, where) for name, _, n, where in got.extras if name.startswith(AGENT_PREFIX)]
    for name, what, n, where in got.extras:
        if not name.startswith(AGENT_PREFIX):
            out.append(f"  + {name} ({what or 'NOT ITEMISED in ' + MIGRATING.name}): {n}, {where}")
    if own:
        places = sorted({where for _, where in own})
        out.append(
            f"  + {AGENT_PREFIX}* ({item_of(AGENT_PREFIX, itemised_in_docs()) or 'NOT ITEMISED'},"
            f" {len(own)} families): {sum(n for n, _ in own)}, {', '.join(places)}"
        )
    return out


def fleet(f: Figures, nodes: int) -> str:
    series = f.series * nodes
    return (
        f"{f.who}: {series} active series, {series / SCRAPE_INTERVAL:.0f} samples/s,"
        f" {f.wire * nodes / SCRAPE_INTERVAL / 1e6:.2f} MB/s scraped"
        + (f", {f.otlp_minute * nodes / 60 / 1e6:.2f} MB/s OTLP" if f.otlp_minute else "")
    )


async def main(args: argparse.Namespace) -> None:
    node = Node(
        gpus=args.gpus,
        mig_gpus=args.mig_gpus,
        mig_per_gpu=args.mig_per_gpu,
        procs=args.procs,
        pods=args.pods,
    )
    where = Endpoints.chart_default()
    if args.telemetry_beside:
        where = dataclasses.replace(where, telemetry=None)
    if args.status_beside:
        where = dataclasses.replace(where, status=None)
    otel, batch, _ = await ours(node, "otel", args, where)
    named, _, text = await ours(node, "dcgm", args, where)
    base = theirs(node, batch, args, readings_of(text))
    labels = ", ".join(
        [*(f"env {k}" for k in args.env), *(f"pod label {k}" for k in args.pod_labels)]
    )
    print(
        f"node: {node.gpus} GPUs ({node.mig_gpus} with {node.mig_per_gpu} MIG instances), "
        f"{node.pods} pods, {node.procs} processes per device, business labels: "
        f"{labels or 'none'}; metric_set: {args.metric_set}"
        + (f" + {', '.join(args.enable)}" if args.enable else "")
        + "; the agent's own metrics: "
        + (
            f"telemetry endpoint :{where.telemetry} (the chart's default)"
            if where.telemetry
            else f"beside the GPU series on :{where.gpu}"
        )
        + "; the GPU status: "
        + (
            f"status endpoint :{where.status} (the chart's default)"
            if where.status
            else f"beside the GPU series on :{where.gpu}"
        )
    )
    for figures in (otel, named, base):
        print(describe(figures, node.gpus, where))
    for figures in (otel, named):
        print(figures.items)
    for mine in (otel, named):
        got = ratios(mine, base)
        print(f"{mine.who} / dcgm-exporter: " + ", ".join(f"{k} {v:.2f}x" for k, v in got.items()))
    itemised = itemise_node(named.families, where)
    for line in itemised_lines(itemised, base):
        print(line)
    print(f"{args.nodes} nodes, scraped every {SCRAPE_INTERVAL:g} s:")
    for figures in (otel, named, base):
        print("  " + fleet(figures, args.nodes))
    by_dcgm, by_otel = ratios(named, base), ratios(otel, base)
    equivalent = itemised.equivalent / base.series
    met = (
        equivalent <= 1.0
        and by_dcgm["dcgm-equivalent line"] <= 1.0
        and itemised.all_itemised
        and by_otel["GPU endpoint series"] <= 1.1
    )
    extra = sum(n for _, _, n, _ in itemised.extras)
    print(
        f"P8 naming dcgm: series {equivalent:.2f}x dcgm-equivalent"
        f" + {extra} {'itemised' if itemised.all_itemised else 'NOT ALL ITEMISED'},"
        f" {by_dcgm['dcgm-equivalent line']:.3f}x bytes per such line; naming otel: series"
        f" {by_otel['GPU endpoint series']:.2f}x on the GPU endpoint ({by_otel['series']:.2f}x"
        f" with the agent's own and the GPU status) (targets: dcgm-equivalent <= 1.0x, the rest itemised,"
        f" <= 1.0x per line; otel <= 1.1x: {'met' if met else 'MISSED'})"
    )


def _names(text: str) -> list[str]:
    return [name for name in text.split(",") if name]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--mig-gpus", type=int, default=0, help="GPUs split into MIG instances")
    parser.add_argument("--mig-per-gpu", type=int, default=3)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--procs", type=int, default=1, help="processes per device")
    parser.add_argument("--env", type=_names, default=[], help="container env keys to export")
    parser.add_argument("--pod-labels", type=_names, default=[], help="pod label keys to export")
    parser.add_argument("--metric-set", choices=["default", "all"], default="default")
    parser.add_argument("--enable", type=_names, default=[], help="metrics switched on as well")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument(
        "--telemetry-beside",
        action="store_true",
        help="the agent's own metrics beside the GPU series (the chart's telemetry.ownPort false)",
    )
    parser.add_argument(
        "--status-beside",
        action="store_true",
        help="health and info beside the GPU series (the chart's gpuStatus.ownPort false)",
    )
    parser.add_argument("--smoke", action="store_true", help="a 2-GPU node, 4 pods")
    args = parser.parse_args()
    if args.smoke:
        args.gpus, args.mig_gpus, args.pods = 2, 0, 4
    return args


if __name__ == "__main__":
    asyncio.run(main(_args()))
