"""P4: the whole enrichment cost of a cycle does not grow with the node's pod count.

The real `k8s_attributes` processor, with its real gRPC pod-resources client, against the
protocol-faithful test kubelet (tests/peers/kubelet.py) serving N pods from a child process
(so the kubelet's own CPU is not counted here). The first 10 pods hold the node's 8 GPUs
(two with 3 MIG instances each); the other pods hold nothing, as on a busy node.

What is counted, per cycle, is everything the processor costs this process:

- `process()` of one batch (8 GPUs, 6 MIG instances, 24 metrics per resource), once per cycle;
- the background refreshes at their real rate: with the default configuration,
  `collection_interval / refresh_interval` refreshes per cycle (nvml 10 s / k8s_attributes
  10 s = 1). A refresh is `List` + `GetAllocatableResources` over gRPC, parsing, and the
  snapshot build (or not, when the answer is unchanged).

Time is scaled: a cycle every `--period` seconds and the refresh interval scaled alike, so
the rate is the default one. CPU is `time.process_time()` over each phase (every thread of
this process: the event loop, gRPC's threads, the parse/build worker thread). Phases
alternate between 10 and 1000 pods so machine noise hits both alike.

The kubelet answers `List` in the same order every time by default; `--shuffle` lists the
pods in a new order on every call, as a real kubelet may (its pod list comes from a Go map).

    python bench/p4_enrichment_scaling.py [--period 0.05] [--phase 3] [--rounds 5] [--shuffle]
    python bench/p4_enrichment_scaling.py --smoke

Target: CPU per cycle at 1000 pods / at 10 pods <= 1.2. The figure line is last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.receivers.nvml.config import NvmlReceiverConfig

ROOT = Path(__file__).resolve().parents[1]
GPUS, MIG_GPUS, MIG_PER_GPU, METRICS = 8, 2, 3, 24
SIZES = (10, 1000)


def _uuid(i: int) -> str:
    return f"GPU-{i:08x}-0000-4000-8000-{i:012x}"


def _mig(i: int, gi: int) -> str:
    return f"MIG-{i:08x}-{gi:04x}-4000-8000-{i:012x}"


def held() -> list[str]:
    """Every device ID the device plugins hand out: the whole GPUs, then the MIG instances."""
    out = [_uuid(i) for i in range(MIG_GPUS, GPUS)]
    return out + [_mig(i, gi) for i in range(MIG_GPUS) for gi in range(MIG_PER_GPU)]


def batch() -> Batch:
    points = (NumberDataPoint(attributes={}, time_unix_nano=1, value=1.0),)
    metrics = tuple(
        Metric(name=f"m{i}", unit="1", description="", kind=MetricKind.GAUGE, points=points)
        for i in range(METRICS)
    )
    out = []
    for i in range(GPUS):
        resource = {semconv.HW_ID: _uuid(i), semconv.HW_NAME: f"nvidia{i}"}
        resource |= {semconv.GPU_INDEX: str(i), semconv.HW_TYPE: "gpu"}
        out.append(ResourceMetrics(resource=resource, metrics=metrics))
        for gi in range(MIG_PER_GPU if i < MIG_GPUS else 0):
            mig = {semconv.HW_ID: _mig(i, gi), semconv.HW_PARENT: _uuid(i)}
            mig |= {semconv.MIG_GPU_INSTANCE_ID: str(gi), semconv.MIG_COMPUTE_INSTANCE_ID: "0"}
            out.append(ResourceMetrics(resource=mig, metrics=metrics))
    return tuple(out)


# --- the kubelet, in a child process ------------------------------------------------------


async def serve_kubelet(pods: int, socket_dir: Path, shuffle: bool) -> None:
    """Serves `pods` pods on `<socket_dir>/kubelet.sock` until stdin closes."""
    from tests.peers.kubelet import FakeKubelet, container, pod

    class Kubelet(FakeKubelet):
        async def List(self, request: Any, context: Any) -> Any:
            if shuffle:
                random.shuffle(self.pods)
            return await super().List(request, context)

    kubelet = Kubelet(socket_dir)
    devices = held()
    entries = []
    for p in range(pods):
        ids = [d for n, d in enumerate(devices) if n % 10 == p]
        main = container("main", {"nvidia.com/gpu": ids} if ids else None)
        entries.append(pod(f"ns-{p % 20}", f"pod-{p}", main, container("sidecar")))
    kubelet.set_pods(*entries)
    kubelet.set_allocatable({"nvidia.com/gpu": devices})
    await kubelet.start()
    print(kubelet.socket, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await kubelet.stop()


@contextlib.asynccontextmanager
async def kubelet_process(pods: int, shuffle: bool) -> AsyncIterator[str]:
    """A child process serving the test kubelet; yields its socket path."""
    with tempfile.TemporaryDirectory(prefix="p4-", dir="/tmp") as tmp:
        args = [sys.executable, "-m", "bench.p4_enrichment_scaling", "--serve", str(pods)]
        args += ["--socket-dir", tmp] + (["--shuffle"] if shuffle else [])
        proc = subprocess.Popen(
            args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdin is not None
        socket = await asyncio.to_thread(proc.stdout.readline)
        try:
            yield socket.strip()
        finally:
            proc.stdin.close()
            await asyncio.to_thread(proc.wait, 10)


# --- the measurement ----------------------------------------------------------------------


class _Host:
    def __init__(self, telemetry: SelfTelemetry) -> None:
        self.telemetry = telemetry

    def readiness(self) -> tuple[bool, list[str]]:
        return True, []


def refreshes_per_cycle() -> float:
    """The default configuration's rate: collection interval / refresh interval."""
    cycle = NvmlReceiverConfig().collection_interval
    return float(cycle / K8sAttributesProcessorConfig().refresh_interval)


async def phase(socket: str, args: argparse.Namespace) -> tuple[float, float, int, int]:
    """(CPU per cycle, CPU of process() per cycle, cycles, refreshes) over one phase."""
    telemetry = SelfTelemetry()
    settings = Settings.for_component(ComponentID("k8s_attributes"), Kind.PROCESSOR, telemetry)
    interval = args.period / refreshes_per_cycle()
    config = K8sAttributesProcessorConfig.model_validate(
        {
            "pod_resources_socket": socket,
            "node_name": "node-a",
            "refresh_interval": f"{interval * 1e3:g}ms",
        }
    )
    proc = K8sAttributesProcessor(settings, config)
    await proc.start(_Host(telemetry))
    b = batch()
    assert any(semconv.K8S_POD_NAME in rm.resource for rm in proc.process(b)), "no labels"
    refresher = proc.refresher
    assert refresher is not None
    await asyncio.sleep(args.period)  # let the refresh loop settle into its rhythm
    loop = asyncio.get_running_loop()
    cycles, in_process, attempts = 0, 0.0, refresher.attempts
    started_cpu, due = time.process_time(), loop.time()
    end = due + args.phase
    while due < end:
        due += args.period
        await asyncio.sleep(max(0.0, due - loop.time()))
        t0 = time.process_time()
        proc.process(b)
        in_process += time.process_time() - t0
        cycles += 1
    total = time.process_time() - started_cpu
    refreshes = refresher.attempts - attempts
    await proc.shutdown()
    return total / cycles, in_process / cycles, cycles, refreshes


async def main(args: argparse.Namespace) -> None:
    rate = refreshes_per_cycle()
    per_cycle: dict[int, list[float]] = {n: [] for n in SIZES}
    in_process: dict[int, list[float]] = {n: [] for n in SIZES}
    refreshes: dict[int, int] = dict.fromkeys(SIZES, 0)
    cycles: dict[int, int] = dict.fromkeys(SIZES, 0)
    async with (
        kubelet_process(SIZES[0], args.shuffle) as small,
        kubelet_process(SIZES[1], args.shuffle) as large,
    ):
        sockets = dict(zip(SIZES, (small, large), strict=True))
        for _ in range(args.rounds):
            for n in SIZES:
                total, proc_only, c, r = await phase(sockets[n], args)
                per_cycle[n].append(total)
                in_process[n].append(proc_only)
                cycles[n] += c
                refreshes[n] += r
    print(
        f"rate: {rate:g} refresh per cycle (default nvml collection_interval / k8s_attributes "
        f"refresh_interval), time scaled to a cycle every {args.period * 1e3:.0f} ms; kubelet "
        f"order {'shuffled per List' if args.shuffle else 'stable'}"
    )
    for n in SIZES:
        med, proc_med = statistics.median(per_cycle[n]), statistics.median(in_process[n])
        refresh_share = (med - proc_med) * cycles[n] / max(1, refreshes[n])
        print(
            f"{n:5d} pods: CPU per cycle {med * 1e6:8.1f} µs (median of {args.rounds} phases), "
            f"of which process() {proc_med * 1e6:6.1f} µs; {refreshes[n]} refreshes in "
            f"{cycles[n]} cycles, ~{refresh_share * 1e6:.0f} µs each (refresh + loop)"
        )
    ratio = statistics.median(per_cycle[SIZES[1]]) / statistics.median(per_cycle[SIZES[0]])
    if args.smoke:
        print(f"P4 smoke: ratio 1000 pods / 10 pods {ratio:.3f} (no target in smoke mode)")
        return
    verdict = "met" if ratio <= 1.2 else "MISSED"
    print(
        f"P4 whole enrichment CPU per cycle, 1000 pods / 10 pods: {ratio:.3f} "
        f"(target <= 1.2: {verdict})"
    )


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--period", type=float, default=0.05, help="seconds per cycle")
    parser.add_argument("--phase", type=float, default=3.0, help="seconds per phase")
    parser.add_argument("--rounds", type=int, default=5, help="phases per size")
    parser.add_argument("--shuffle", action="store_true", help="kubelet lists in random order")
    parser.add_argument("--smoke", action="store_true", help="one short phase per size")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--socket-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.phase, args.rounds = 0.5, 1
    return args


if __name__ == "__main__":
    options = _args()
    if options.serve is not None:
        asyncio.run(serve_kubelet(options.serve, options.socket_dir, options.shuffle))
    else:
        asyncio.run(main(options))
