"""The CPU an idle simulated nvml receiver burns between collections: its XID thread's waits.

A receiver on the simulated backend (8 GPUs, the default metric set, so XID events are
watched) collects once, then sits idle for `--seconds` of wall time while its XID thread waits
for events that never come. Printed: the process's CPU time over the idle window
(`time.process_time`, every thread), and how many `nvmlEventSetWait` calls the thread made,
per second. Real NVML's wait returns after its timeout (the watcher's 500 ms) when no event
comes: about 2 waits per second is what a real GPU costs; more is the simulator's own cost,
which inflates every CPU figure measured on it (P2, P6, the soak).

    python bench/nvml_idle_cpu.py [--seconds 10] [--gpus 8]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from otelgpu.receivers.nvml.xid import WAIT_MS
from tests.fakes import Sink


async def idle(seconds: float, gpus: int) -> tuple[float, int]:
    """(CPU seconds, event waits) over `seconds` of an idle receiver, after its first cycle."""
    telemetry = SelfTelemetry()
    settings = Settings.for_component(ComponentID("nvml"), Kind.RECEIVER, telemetry)
    config = NvmlReceiverConfig.model_validate(
        {"backend": "simulated", "collection_interval": "1h", "simulated": {"gpus": gpus}}
    )
    receiver = NvmlReceiver(settings, config, Sink())
    try:
        await receiver.scrape()  # opens NVML, starts the XID thread
        client = receiver.client
        assert isinstance(client, SimulatedNvml)
        waits, cpu = client.calls["nvmlEventSetWait"], time.process_time()
        await asyncio.sleep(seconds)  # a benchmark: wall time is what it measures
        return time.process_time() - cpu, client.calls["nvmlEventSetWait"] - waits
    finally:
        await receiver.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    cpu, waits = asyncio.run(idle(args.seconds, args.gpus))
    real = args.seconds * 1000 / WAIT_MS
    print(
        f"idle simulated receiver, {args.gpus} GPUs, {args.seconds:g} s: "
        f"CPU {cpu * 1000:.1f} ms ({cpu * 1000 / args.seconds:.2f} ms/s), "
        f"event waits {waits} ({waits / args.seconds:.1f}/s; real NVML with no event: "
        f"{real / args.seconds:.1f}/s, ratio {waits / real:.1f}x)"
    )


if __name__ == "__main__":
    main()
