"""Renders `docs/metrics.md` from the catalog: `python -m otelgpu.receivers.nvml.docs`.

A unit test compares the committed file with this output, so the docs cannot drift.
"""

from __future__ import annotations

import sys

from otelgpu.pdata import semconv
from otelgpu.receivers.nvml.dcgm_fields import ON_DCGM, ON_HEALTH, default_reason, fields_of
from otelgpu.receivers.nvml.metrics import CATALOG, MetricSpec

_HEADER = """\
# GPU metrics

Every metric the `nvml` receiver can emit. This file is generated from the catalog in
`otelgpu/receivers/nvml/metrics.py` (`python -m otelgpu.receivers.nvml.docs > docs/metrics.md`);
a test fails when they disagree.

## On by default

The default set is lean: no larger than dcgm-exporter's default counters
(`etc/default-counters.csv`) on the same GPU, plus what only this agent gives. The Default
column says why a metric is on:

- `yes (dcgm)`: it carries one of dcgm-exporter's default counters (utilization, framebuffer memory,
  clocks, temperatures, power and energy, PCIe replays and throughput, NVLink traffic, XIDs,
  remapped rows, vGPU licence, graphics / tensor / DRAM activity);
- `yes (health)`: the agent's view of the GPU, one series per GPU: `nvidia.gpu.up`, which also
  carries the health summary (`hw.state` and `nvidia.gpu.health.reason`);
- `yes (holders)`: who holds each GPU, the allocation series `k8s_attributes` adds (below).

Everything else is opt-in: detail dcgm-exporter also leaves out by default (a series per NVLink,
per clock-event reason, per violation policy, per PCIe link limit; ECC and retired-page counts;
the other GPM pipes; the GPU's own temperature limits and its T.Limit margin, which
`OtelgpuGPUTemperatureHigh` judges each GPU by where they are on), what the defaults already
give in another form (memory limit and
utilization are usage + free + reserved; the power limit; `hw.status`, the health summary as
the hardware conventions shape it, a series per state), and the per-process metrics (a
series per process, gone and replaced at each restart): switch them on by name, with
`processes: true`. With `processes: true` and none of them on, the receiver still lists each
GPU's processes (no series of their own), so `otelgpu_gpu_processes_outside_allocation` counts
squatters either way. The health summary still reads the inputs of its rules (clock events,
PCIe link, NVLink state, pending repairs, XIDs) while their own metrics are off; they are
emitted only when switched on. `python bench/fleet_cost.py` counts the series and bytes per node
against dcgm-exporter's defaults.

Switch one metric on or off, or everything on at once (`metric_set: all`; the per-metric
switches still win over it):

```yaml
receivers:
  nvml:
    metric_set: default          # or `all`: every metric in the table
    metrics:
      nvidia.gpu.clock.event.active: {enabled: true}
      nvidia.gpu.process.memory.usage: {enabled: true}   # with processes: true
      nvidia.gpu.pcie.tx.throughput: {enabled: false}
```

## Metrics

Sources: `field:` values are read in one batched `nvmlDeviceGetFieldValues` call per GPU per
cycle; `call:` needs a dedicated NVML call; `gpm:` comes from GPU performance monitoring
(Hopper and later; two samples per value: the receiver takes one when it opens NVML and
collects 0.2 s later, so the first collection, at start and after a reload, has them too);
`event:` is counted from NVML events;
`process:` is read only with `processes: true`. A source a GPU does not support is asked
once and then skipped for that GPU.

Ratios (`1`) are 0..1, as the OpenTelemetry hardware conventions have them; dcgm-exporter
reports the same readings in %, MiB, MHz and mJ. A GPM ratio is held to 1: over a short
interval GPM can compute more than 100 % (an H100 gave DRAM bandwidth over 100 % between two
samples ~7 ms apart), which is a sampling artefact, not a reading.

Cost per cycle, measured on an H100 (driver 580.159.04, `python bench/p6_nvml.py`, which
prints it per call on any board), with the clock-event, NVLink, ECC and PCIe-link metrics on
as well as the default ones: ~7 ms per GPU, of which the batched field read is ~4 ms
(`NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION` alone 3.3 ms) and every other call under 0.05 ms.
`nvmlDeviceGetPcieThroughput` sleeps through a 20 ms sample per direction, so
`nvidia.gpu.pcie.{tx,rx}.throughput` come from GPM where the GPU has it and add ~41 ms per GPU
per cycle only before Hopper.

"""

_ALLOCATION = (
    "One series per holder of each allocated GPU or MIG instance: value 1 for a whole device, "
    "1/N when N containers share it (time-slicing, MPS). Carries "
    f"`{semconv.HW_ID}`, the holder's `k8s.*` names, its business labels and "
    f"`{semconv.GPU_REPLICA}` (the device plugin's replica IDs; dcgm's `vgpu`). Multiply a "
    f"device metric by it on `{semconv.HW_ID}` to split that metric between pods: see "
    "docs/prometheus.md."
)

_RESOURCE = f"""
## Resource attributes

Every GPU series carries `{semconv.HW_ID}` (GPU UUID), `{semconv.HW_TYPE}` (`gpu`),
`{semconv.HW_NAME}` (`nvidia0`), `{semconv.HW_MODEL}`, `{semconv.HW_VENDOR}` (`NVIDIA`),
`{semconv.GPU_INDEX}`, `{semconv.GPU_PCI_BUS_ID}`, `{semconv.HW_DRIVER_VERSION}`,
`{semconv.HW_SERIAL_NUMBER}` and `{semconv.HW_FIRMWARE_VERSION}` (the VBIOS; both left out where
NVML has none) and `{semconv.HOST_NAME}` (the node name from `K8S_NODE_NAME` when it is set, as
dcgm-exporter's `Hostname`; else the hostname). The simulated backend adds
`{semconv.SIMULATED}=true` to every resource. A MIG instance is its own resource:
`{semconv.HW_ID}` is the MIG UUID,
`{semconv.HW_NAME}` is `nvidia0/gi<N>`, and it adds `{semconv.HW_PARENT}` (the GPU's UUID),
`{semconv.MIG_PROFILE}`, `{semconv.MIG_GPU_INSTANCE_ID}` and `{semconv.MIG_COMPUTE_INSTANCE_ID}`.
Per-process metrics are one resource per (GPU, process): the GPU's attributes plus
`{semconv.PROCESS_PID}` and `{semconv.CONTAINER_ID}` (empty for a host process). A process is
labelled with the pod and container it runs in (from its container ID, by `container_env`),
never with the pod its GPU is allocated to.

## Series identity

A series is its metric, its device (`{semconv.HW_ID}`; a MIG instance has its own) and the
attributes the receiver produced (`error.type`, `nvidia.xid.code`, `hw.gpu.task`,
`{semconv.PROCESS_PID}`). Labels that processors add (pod, container, business labels) are
properties of that series: when they change, the old label set is gone from `/metrics` at once
and never sent again by OTLP; `metric_expiration` only removes devices and processes that stop
reporting. Device metrics are emitted once per GPU and once per MIG instance, whoever holds
them, so `sum()` over a node is the node's real total.

## Semantic conventions

`hw.*` names follow the OpenTelemetry hardware semantic conventions (schema
`{semconv.SCHEMA_URL}`, sent as the OTLP schema URL; the scope version is the agent's version).
`otelgpu/receivers/nvml/semconv_facts.yaml` keeps the conventions' facts the receiver relies on,
with the commit they were read at, and a test holds every emitted name, type, unit and attribute
against it. In particular:

- `hw.gpu.memory.utilization` is the fraction of memory **used** (used / total). NVML's "memory
  utilization rate" (time device memory was busy, dcgm's `DCGM_FI_DEV_MEM_COPY_UTIL`) is
  `nvidia.gpu.memory.busy`.
- `hw.gpu.utilization` carries `hw.gpu.task`: `general`, `encoder`, `decoder` (dcgm's
  `DCGM_FI_DEV_GPU_UTIL`, `_ENC_UTIL`, `_DEC_UTIL`).
- `hw.errors` has `error.type` `corrected` / `uncorrected`; `hw.status` has `hw.state` `ok` /
  `degraded` / `failed` (1 for the state the GPU is in) and, beyond the conventions,
  `nvidia.gpu.health.reason` (why; rules in docs/migrating-from-dcgm-exporter.md). It is
  opt-in: by default the same summary rides on `nvidia.gpu.up`'s one series per GPU, whose
  `hw.state` is the current state, so a healthy fleet pays one series per GPU for it, not
  three.
- `hw.gpu.memory.usage` and `hw.gpu.memory.limit` are UpDownCounters (non-monotonic sums) in
  OTLP; Prometheus shows them as gauges.
- Every data point carries `{semconv.HW_ID}` and `{semconv.HW_TYPE}` (the conventions require
  them), so an OTLP consumer that does not promote resource attributes (Prometheus's own OTLP
  endpoint by default) still keeps one series per GPU.

Where we deliberately differ:

- `hw.temperature` points belong to the GPU (`hw.type=gpu`, the GPU's `hw.id`) with
  `hw.sensor_location` `gpu` (core) or `memory` (HBM); the conventions model a temperature
  sensor as a component of its own (`hw.type=temperature`). So do `hw.temperature.limit`'s,
  one per limit the board answers (`nvmlDeviceGetTemperatureThreshold`, read once per GPU):
  `hw.limit_type` `high.critical` (shutdown, dcgm's `DCGM_FI_DEV_SHUTDOWN_TEMP`),
  `high.degraded` (hardware slowdown, `DCGM_FI_DEV_SLOWDOWN_TEMP`) or `max` (maximum operating
  temperature, `DCGM_FI_DEV_GPU_MAX_OP_TEMP`), `hw.sensor_location=gpu`. Hopper boards show no
  absolute limit in nvidia-smi, only margins to the GPU's T.Limit, and may answer none:
  `nvidia.gpu.temperature.margin` (`DCGM_FI_DEV_GPU_TEMP_LIMIT`) is how far below its T.Limit
  a GPU runs, whatever the board.
- `hw.driver_version`, `hw.serial_number`, `hw.firmware_version`, `hw.model` and `hw.vendor`
  are resource attributes (one value per GPU), not repeated on every data point as the GPU
  metric attribute group lists them.
- NVLink traffic is `nvidia.gpu.nvlink.io`, both directions added (dcgm-exporter's
  `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`: one series per GPU); the opt-in
  `nvidia.gpu.nvlink.io.by_direction` has a point per `network.io.direction` (shaped like
  `hw.gpu.io`, which does not say which bus). A GPU that answers one direction only in a cycle
  has no total that cycle (half a total would read as a counter reset).

## Metrics added by processors

| Name | Unit | Type | Added by | Default | Description |
|---|---|---|---|---|---|
| `{semconv.GPU_ALLOCATION}` | `1` | gauge | `k8s_attributes` | yes (holders) | {_ALLOCATION} |

A device held by one container carries that container's labels itself. A device shared by
several carries none of theirs, only `{semconv.GPU_SHARED}=true` and `{semconv.GPU_HOLDERS}`; a
MIG-enabled GPU carries none of its instances' holders.
"""


# The Default column: the short name of each reason `default_reason` gives.
_REASONS = {ON_DCGM: "yes (dcgm)", ON_HEALTH: "yes (health)", "": "no"}


def _row(spec: MetricSpec) -> str:
    kind = "counter" if spec.monotonic else spec.kind.value
    attributes = ", ".join(f"`{a}`" for a in spec.attributes) or ""
    dcgm = "<br>".join(f"`{n}`" for n in fields_of(spec)) or "—"
    cells = (
        f"`{spec.name}`",
        f"`{spec.unit}`",
        kind,
        attributes,
        _REASONS[default_reason(spec)],
        "<br>".join(f"`{source}`".replace(",", ", ") for source in spec.sources),
        dcgm,
        spec.description.replace("|", "\\|"),
    )
    return "| " + " | ".join(cells) + " |"


def render_markdown() -> str:
    """The whole of docs/metrics.md."""
    lines = [
        "| Name | Unit | Type | Attributes | Default | NVML source | dcgm-exporter | Description |",
        "|---|---|---|---|---|---|---|---|",
        *(_row(spec) for spec in CATALOG),
    ]
    return _HEADER + "\n".join(lines) + "\n" + _RESOURCE


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
