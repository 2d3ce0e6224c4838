"""P5: no pod-resources I/O on the processing path.

Runs the processor against the test kubelet (a real gRPC pod-resources server on a unix
socket, `tests/peers/kubelet.py`) with 110 pods and a 100 ms refresh interval, and times
each batch's processing while batches arrive every 5 ms on the event loop:

- `process()`: the call itself (perf_counter around it);
- batch latency: from the moment the batch was due to the end of its processing, which
  also catches any event-loop stall the refresh could cause.

Phases alternate: healthy kubelet, then a kubelet that answers every request in 2 s
(the client's 5 s timeout is not reached, so a request is always in flight). Target: the
slow phase's p99 ≤ 1.2 times the healthy phase's (same run), labels still served.
Run: python bench/p5_slow_pod_resources.py
     python bench/p5_slow_pod_resources.py --smoke   # short phases, no targets (tests use it)
The figure line is last.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.p4_enrichment_scaling import batch
from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.fakes import FakeHost
from tests.peers.kubelet import FakeKubelet, container, pod

PERIOD = 0.005  # a batch every 5 ms
PHASE = 4.0  # seconds per phase
ROUNDS = 2  # healthy, slow, healthy, slow


async def measure(proc: K8sAttributesProcessor, seconds: float) -> tuple[list[float], list[float]]:
    """(process() times, batch latencies) in seconds over `seconds` of batches."""
    b = batch()
    calls, latencies = [], []
    loop = asyncio.get_running_loop()
    due = loop.time()
    end = due + seconds
    while due < end:
        due += PERIOD
        await asyncio.sleep(max(0.0, due - loop.time()))
        started = time.perf_counter()
        out = proc.process(b)
        calls.append(time.perf_counter() - started)
        latencies.append(max(0.0, loop.time() - due))
        assert any(semconv.K8S_POD_NAME in rm.resource for rm in out), "labels must be served"
    return calls, latencies


def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if q < 100 else max(values)


async def main(args: argparse.Namespace) -> None:
    phase_seconds, rounds = (0.5, 1) if args.smoke else (PHASE, ROUNDS)
    kubelet = FakeKubelet()
    await kubelet.start()
    held = [str(rm.resource[semconv.HW_ID]) for rm in batch()]
    kubelet.set_pods(
        *(
            pod("ns", f"p{i}", container("c", {"nvidia.com/gpu": [held[i]]} if i < 14 else None))
            for i in range(110)
        )
    )
    telemetry = SelfTelemetry()
    settings = Settings.for_component(ComponentID("k8s_attributes"), Kind.PROCESSOR, telemetry)
    config = K8sAttributesProcessorConfig.model_validate(
        {"pod_resources_socket": str(kubelet.socket), "refresh_interval": "100ms"}
    )
    proc = K8sAttributesProcessor(settings, config)
    await proc.start(FakeHost(telemetry))
    while proc.snapshot is None:
        await asyncio.sleep(0.01)
    await measure(proc, 0.5)  # warm-up
    results: dict[str, tuple[list[float], list[float]]] = {"healthy": ([], []), "slow": ([], [])}
    for _ in range(rounds):
        for phase, delay in (("healthy", 0.0), ("slow", 2.0)):
            kubelet.delay = delay
            await asyncio.sleep(0.3)  # let a slow request get in flight
            calls, lat = await measure(proc, phase_seconds)
            results[phase][0].extend(calls)
            results[phase][1].extend(lat)
    slow_calls = kubelet.count("List")
    await proc.shutdown()
    await kubelet.close()
    print(f"List calls made: {slow_calls}; snapshot kept serving labels in both phases")
    for phase, (calls, lat) in results.items():
        print(
            f"{phase:8} n={len(calls)}  process() p50 {p(calls, 50) * 1e6:.1f} µs "
            f"p99 {p(calls, 99) * 1e6:.1f} µs | batch latency p50 {p(lat, 50) * 1e3:.3f} ms "
            f"p99 {p(lat, 99) * 1e3:.3f} ms"
        )
    h, s = results["healthy"], results["slow"]
    print(f"P5 process() p99 slow / healthy: {p(s[0], 99) / p(h[0], 99):.3f} (target <= 1.2)")
    print(f"P5 batch latency p99 slow / healthy: {p(s[1], 99) / p(h[1], 99):.3f} (target <= 1.2)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="short phases, one round")
    asyncio.run(main(parser.parse_args()))
