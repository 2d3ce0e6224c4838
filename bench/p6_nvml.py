"""P6: the nvml receiver's cycle on a real GPU vs a bare loop of the same NVML calls vs nvidia-smi.

Three ways to read the same readings from every GPU, timed in the same run, rounds alternating:
- agent: `NvmlReceiver.scrape()` (worker thread, batched fields, points built, default metrics);
- bare: the same NVML calls straight through pynvml in a plain loop, results thrown away;
- nvidia-smi: one `nvidia-smi --query-gpu=... --format=csv` process for the same fields.

Targets: agent / bare ≤ 1.5; nvidia-smi / agent ≥ 20.
Without a GPU (no NVML library, no device) it says so and exits 0; it then times the agent
against the bare loop on the simulated backend, as a measure of the receiver's own overhead.
Run: python bench/p6_nvml.py [--cycles N]
     python bench/p6_nvml.py --smoke   # simulated backend, a few cycles (tests use it)
The figure line is last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otelgpu.component import ComponentID, Kind, Settings
from otelgpu.model import point_count
from otelgpu.receivers.nvml import nvml, real_nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.sources import Plan
from otelgpu.telemetry import SelfTelemetry

SMI_FIELDS = (
    "utilization.gpu,utilization.memory,encoder.stats.averageFps,memory.used,memory.free,"
    "memory.reserved,memory.total,clocks.sm,clocks.mem,temperature.gpu,temperature.memory,"
    "power.draw,pcie.link.gen.current,ecc.errors.corrected.volatile.total,"
    "ecc.errors.uncorrected.volatile.total"
)
SMI_FALLBACK = "utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu"


class Null:
    """A consumer that drops batches (the bench measures collection, not export)."""

    async def consume(self, batch: Any) -> None:
        return None


def receiver(config: dict[str, Any], client: nvml.NvmlClient | None = None) -> NvmlReceiver:
    settings = Settings.for_component(ComponentID("nvml"), Kind.RECEIVER, SelfTelemetry())
    parsed = NvmlReceiverConfig.model_validate(config)
    return NvmlReceiver(settings, parsed, Null(), client=client)


def bare_loop(client: nvml.NvmlClient, handles: list[Any]) -> Callable[[], None]:
    """The agent's NVML calls for the default metrics, with nothing around them."""
    plan = Plan.build(NvmlReceiverConfig().enabled_metrics())
    field_ids = [r.field_id for r in plan.fields]
    gpm_ids = [metric_id for metric_id, _, _ in plan.gpm]
    gpm = {
        i: [client.gpm_sample_alloc(), client.gpm_sample_alloc()]
        for i, h in enumerate(handles)
        if _gpm_supported(client, h)
    }

    def cycle() -> None:
        for i, handle in enumerate(handles):
            client.field_values(handle, field_ids)
            for reader in plan.calls:
                with contextlib.suppress(nvml.NvmlError):  # as the agent: skipped, not fatal
                    reader.read(client, handle)
            if i in gpm:
                previous, current = gpm[i]
                client.gpm_sample(handle, current)
                client.gpm_metrics(previous, current, gpm_ids)
                gpm[i] = [current, previous]

    return cycle


def _gpm_supported(client: nvml.NvmlClient, handle: Any) -> bool:
    try:
        return client.gpm_supported(handle)
    except nvml.NvmlError:
        return False


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def agent_cycle(recv: NvmlReceiver, loop: asyncio.AbstractEventLoop) -> Callable[[], int]:
    return lambda: point_count(loop.run_until_complete(recv.scrape()))


def smi_cycle() -> Callable[[], None] | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    for fields in (SMI_FIELDS, SMI_FALLBACK):
        cmd = [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"]
        if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:

            def run(cmd: list[str] = cmd) -> None:
                subprocess.run(cmd, capture_output=True, check=True)

            return run
    return None


def compare(
    label: str, recv: NvmlReceiver, bare: Callable[[], None], cycles: int
) -> tuple[float, float]:
    """(agent, bare) median seconds per cycle."""
    loop = asyncio.new_event_loop()
    agent = agent_cycle(recv, loop)
    points = agent()  # opens NVML, primes GPM
    agent_t: list[float] = []
    bare_t: list[float] = []
    for _ in range(5):  # alternate so noise hits both alike
        agent_t += timed(agent, cycles // 5)
        bare_t += timed(bare, cycles // 5)
    loop.run_until_complete(recv.shutdown())
    loop.close()
    a, b = statistics.median(agent_t), statistics.median(bare_t)
    print(f"{label}: {points} points per cycle")
    print(f"  agent cycle   median {a * 1e3:9.3f} ms  (p90 {_p90(agent_t) * 1e3:.3f} ms)")
    print(f"  bare loop     median {b * 1e3:9.3f} ms  (p90 {_p90(bare_t) * 1e3:.3f} ms)")
    print(f"  agent / bare  {a / b:.2f}x  (target <= 1.5x on a real GPU)")
    return a, b


def _p90(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.9)]


def simulated(cycles: int) -> None:
    """The receiver's own overhead, on the simulated backend."""
    config: dict[str, Any] = {"simulated": {"gpus": [{"mig": [{}, {}]}, *({} for _ in range(7))]}}
    recv = receiver(config)
    client = recv.client
    client.init()
    handles = [client.device_handle(i) for i in range(client.device_count())]
    a, b = compare(
        "simulated backend, 8 GPUs (receiver overhead only)",
        recv,
        bare_loop(client, handles),
        cycles,
    )
    print(f"P6 simulated backend: agent / bare loop {a / b:.2f}x (receiver overhead; no target)")


def real(cycles: int, client: real_nvml.RealNvml) -> None:
    handles = [client.device_handle(i) for i in range(client.device_count())]
    names = {client.name(h) for h in handles}
    print(f"{len(handles)} GPU(s): {', '.join(sorted(names))}; driver {client.driver_version()}")
    agent_s, bare_s = compare(
        "real NVML", receiver({"backend": "nvml"}), bare_loop(client, handles), cycles
    )
    verdict = "met" if agent_s / bare_s <= 1.5 else "MISSED"
    smi = smi_cycle()
    if smi is None:
        print("  nvidia-smi: not found; no comparison")
        print(f"P6 real GPU: agent / bare {agent_s / bare_s:.2f}x (target <= 1.5: {verdict})")
        return
    smi_t = timed(smi, max(5, cycles // 10))
    s = statistics.median(smi_t)
    print(f"  nvidia-smi    median {s * 1e3:9.3f} ms per query of the same fields")
    print(f"  nvidia-smi / agent  {s / agent_s:.1f}x faster  (target >= 20x)")
    smi_verdict = "met" if s / agent_s >= 20 else "MISSED"
    print(
        f"P6 real GPU: agent / bare {agent_s / bare_s:.2f}x (target <= 1.5: {verdict}); "
        f"nvidia-smi / agent {s / agent_s:.1f}x (target >= 20: {smi_verdict})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="simulated backend, 10 cycles")
    args = parser.parse_args()
    if args.smoke:
        simulated(10)
        return 0
    client = real_nvml.RealNvml()
    try:
        client.init()
        count = client.device_count()
    except nvml.NvmlError as exc:
        print(f"P6: no NVIDIA GPU here ({exc}); the real-GPU comparison needs one. Skipped.")
        count = 0
    if count:
        try:
            real(args.cycles, client)
        finally:
            client.shutdown()
        return 0
    simulated(args.cycles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
