"""P6: the nvml receiver's cycle on a real GPU vs a bare loop of the same NVML calls vs nvidia-smi.

Three ways to read the same readings from every GPU, timed in the same run, rounds alternating:
- agent: `NvmlReceiver.scrape()` (worker thread, batched fields, points built, default metrics);
- bare: the same NVML calls straight through pynvml in a plain loop, results thrown away;
- nvidia-smi: one `nvidia-smi --query-gpu=... --format=csv` process, against the agent reading
  the catalog metrics of exactly those fields (`SMI_METRIC`), like for like; the default
  metrics' cycle against nvidia-smi is printed too.
The bare loop is the agent's own NVML calls of one cycle, recorded through a pass-through
client and replayed (`Recorder`), so it makes the same calls, no more and no fewer; each
call's own time is printed after (`per_call`): where a cycle goes on this board and driver.

Targets: agent / bare ≤ 1.5; nvidia-smi / agent ≥ 20.
Without a GPU (no NVML library, no device) it says so and exits 0; it then times the agent
against the bare loop on the simulated backend, as a measure of the receiver's own overhead.
Run: python bench/p6_nvml.py [--cycles N] [--every-metric]
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

from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import point_count
from otelgpu.receivers.nvml import nvml, real_nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.metrics import BY_NAME
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.sources import FIELD_IDS

SMI_FIELDS = (
    "utilization.gpu,utilization.memory,encoder.stats.averageFps,memory.used,memory.free,"
    "memory.reserved,memory.total,clocks.sm,clocks.mem,temperature.gpu,temperature.memory,"
    "power.draw,pcie.link.gen.current,ecc.errors.corrected.volatile.total,"
    "ecc.errors.uncorrected.volatile.total"
)
SMI_FALLBACK = "utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu"
# The catalog metric that carries each nvidia-smi field: the agent reads the same readings.
SMI_METRIC = {
    "utilization.gpu": "hw.gpu.utilization",
    "utilization.memory": "nvidia.gpu.memory.busy",
    "encoder.stats.averageFps": "hw.gpu.utilization",  # the encoder's share of it
    "memory.used": "hw.gpu.memory.usage",
    "memory.free": "nvidia.gpu.memory.free",
    "memory.reserved": "nvidia.gpu.memory.reserved",
    "memory.total": "hw.gpu.memory.limit",
    "clocks.sm": "nvidia.gpu.sm.clock",
    "clocks.mem": "nvidia.gpu.memory.clock",
    "temperature.gpu": "hw.temperature",
    "temperature.memory": "hw.temperature",
    "power.draw": "hw.power",
    "pcie.link.gen.current": "nvidia.gpu.pcie.link.generation",
    "ecc.errors.corrected.volatile.total": "hw.errors",
    "ecc.errors.uncorrected.volatile.total": "hw.errors",
}


class Null:
    """A consumer that drops batches (the bench measures collection, not export)."""

    async def consume(self, batch: Any) -> None:
        return None


def receiver(config: dict[str, Any], client: nvml.NvmlClient | None = None) -> NvmlReceiver:
    settings = Settings.for_component(ComponentID("nvml"), Kind.RECEIVER, SelfTelemetry())
    parsed = NvmlReceiverConfig.model_validate(config)
    return NvmlReceiver(settings, parsed, Null(), client=client)


class Recorder:
    """An NVML client that passes every call on, noting those made while `calls` is a list.

    It sees exactly what the agent asks NVML in one cycle (after the cycles that prime GPM and
    learn which reads the board refuses), so the bare loop replays the same calls, no more and
    no fewer. The XID watcher's calls (its own thread, blocking waits) are not part of a cycle.
    """

    NOT_A_CYCLE = frozenset(
        {"init", "shutdown", "event_set_create", "register_xid_events", "event_wait"}
        | {"event_set_free", "gpm_sample_free"}
    )

    def __init__(self, client: nvml.NvmlClient) -> None:
        self.client = client
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] | None = None
        self.samples: list[Any] = []  # GPM sample buffers the agent allocated (kept alive)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.calls is not None and name not in self.NOT_A_CYCLE:
                self.calls.append((name, args, kwargs))
            answer = method(*args, **kwargs)
            if name == "gpm_sample_alloc":
                self.samples.append(answer)
            return answer

        return call


def recorded_cycle(config: dict[str, Any], client: nvml.NvmlClient) -> Recorder:
    """The NVML calls of the agent's third cycle for `config` (the first two prime)."""
    recorder = Recorder(client)
    recv = receiver(config, client=recorder)  # type: ignore[arg-type]  # a stand-in client
    loop = asyncio.new_event_loop()
    try:
        for _ in range(2):
            loop.run_until_complete(recv.scrape())
        recorder.calls = []
        loop.run_until_complete(recv.scrape())
    finally:
        loop.run_until_complete(recv.shutdown())
        loop.close()
    return recorder


def bare_loop(client: nvml.NvmlClient, recorded: Recorder) -> Callable[[], None]:
    """`recorded`'s calls straight on `client`, in a plain loop, each error ignored (as the
    agent skips a failed read). GPM buffers are the loop's own, swapped each cycle as the
    agent swaps its pair; arguments are resolved before timing, so the loop only calls."""
    assert recorded.calls is not None
    agent_ids = {id(s) for s in recorded.samples}
    own = {id(s): client.gpm_sample_alloc() for s in recorded.samples}
    swapped = dict(own)
    for name, args, _ in recorded.calls:
        if name == "gpm_metrics":  # (previous, current, ids): the pair trades places
            swapped[id(args[0])], swapped[id(args[1])] = own[id(args[1])], own[id(args[0])]

    def steps(buffers: dict[int, Any]) -> list[tuple[Callable[..., Any], tuple[Any, ...], Any]]:
        assert recorded.calls is not None
        return [
            (
                getattr(client, name),
                tuple(buffers[id(a)] if id(a) in agent_ids else a for a in args),
                kwargs,
            )
            for name, args, kwargs in recorded.calls
        ]

    plans = (steps(own), steps(swapped))
    turn = [0]

    def cycle() -> None:
        for method, args, kwargs in plans[turn[0]]:
            # not contextlib.suppress: a context manager per call would slow the baseline
            try:  # noqa: SIM105
                method(*args, **kwargs)
            except nvml.NvmlError:
                pass
        turn[0] ^= 1

    print(f"bare loop: the agent's {len(recorded.calls)} NVML calls of one cycle, replayed")
    cycle()  # the first fills one buffer of each pair; from the second on GPM compares two
    cycle()
    return cycle


FIELD_NAMES = {number: name for name, number in FIELD_IDS.items()}


def per_call(client: nvml.NvmlClient, recorded: Recorder, repeats: int = 10) -> None:
    """Each recorded call timed alone (median of `repeats`), slowest first; a batched field
    read also field by field: where a cycle's time goes on this board and driver."""
    assert recorded.calls is not None
    rows: list[tuple[float, str]] = []
    for name, args, kwargs in recorded.calls:
        method = getattr(client, name)
        if name.startswith("gpm_"):
            continue  # the sample buffers are the agent's, freed by now
        rows.append((_median_call(method, args, kwargs, repeats), _label(name, args)))
        if name == "field_values":
            for field_id in args[1]:
                took = _median_call(method, (args[0], [field_id]), {}, repeats)
                rows.append((took, f"  field {FIELD_NAMES.get(field_id, field_id)} alone"))
    print(f"per call (median of {repeats}), slowest first:")
    for took, label in sorted(rows, reverse=True):
        print(f"  {took * 1e3:9.3f} ms  {label}")


def _median_call(
    method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], repeats: int
) -> float:
    def call() -> None:
        with contextlib.suppress(nvml.NvmlError):  # a refused read costs its time too
            method(*args, **kwargs)

    return statistics.median(timed(call, repeats))


def _label(name: str, args: tuple[Any, ...]) -> str:
    shown = [a for a in args[1:] if isinstance(a, int | str)]
    if name == "field_values":
        return f"{name} ({len(args[1])} fields)"
    return f"{name}({', '.join(map(str, shown))})" if shown else name


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def agent_cycle(recv: NvmlReceiver, loop: asyncio.AbstractEventLoop) -> Callable[[], int]:
    return lambda: point_count(loop.run_until_complete(recv.scrape()))


def smi_cycle() -> tuple[Callable[[], None], str] | None:
    """One `nvidia-smi --query-gpu` run, and the fields it asks (None: no nvidia-smi)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    for fields in (SMI_FIELDS, SMI_FALLBACK):
        cmd = [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"]
        if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:

            def run(cmd: list[str] = cmd) -> None:
                subprocess.run(cmd, capture_output=True, check=True)

            return run, fields
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
    a, b = compare(
        "simulated backend, 8 GPUs (receiver overhead only)",
        recv,
        bare_loop(client, recorded_cycle(config, client)),
        cycles,
    )
    print(f"P6 simulated backend: agent / bare loop {a / b:.2f}x (receiver overhead; no target)")


def real(cycles: int, client: nvml.NvmlClient, every_metric: bool) -> None:
    handles = [client.device_handle(i) for i in range(client.device_count())]
    names = {client.name(h) for h in handles}
    print(f"{len(handles)} GPU(s): {', '.join(sorted(names))}; driver {client.driver_version()}")
    config: dict[str, Any] = {"backend": "nvml"}
    if every_metric:
        config["metrics"] = {name: {"enabled": True} for name in BY_NAME}
    recorded = recorded_cycle(config, client)
    agent_s, bare_s = compare(
        f"real NVML, {'every metric' if every_metric else 'default metrics'}",
        receiver(config, client),
        bare_loop(client, recorded),
        cycles,
    )
    per_call(client, recorded)
    verdict = "met" if agent_s / bare_s <= 1.5 else "MISSED"
    if every_metric:
        print(f"P6 real GPU, every metric: agent / bare {agent_s / bare_s:.2f}x (no target)")
        return
    found = smi_cycle()
    if found is None:
        print("  nvidia-smi: not found; no comparison")
        print(f"P6 real GPU: agent / bare {agent_s / bare_s:.2f}x (target <= 1.5: {verdict})")
        return
    smi, fields = found
    # Like for like: the agent reading the metrics of nvidia-smi's fields, no more.
    wanted = {SMI_METRIC[f] for f in fields.split(",")}
    same: dict[str, Any] = {
        "backend": "nvml",
        "metrics": {name: {"enabled": name in wanted} for name in BY_NAME},
    }
    same_s, _ = compare(
        "real NVML, the metrics of nvidia-smi's fields",
        receiver(same, client),
        bare_loop(client, recorded_cycle(same, client)),
        cycles,
    )
    s = statistics.median(timed(smi, max(5, cycles // 10)))
    print(f"  nvidia-smi    median {s * 1e3:9.3f} ms per run (--query-gpu={fields})")
    print(f"  nvidia-smi / agent, the same fields  {s / same_s:.1f}x faster  (target >= 20x)")
    print(
        f"  nvidia-smi / agent, default metrics  {s / agent_s:.1f}x (the default reads more "
        "than nvidia-smi's query offers: energy, clock events and violations, GPM, NVLink)"
    )
    smi_verdict = "met" if s / same_s >= 20 else "MISSED"
    print(
        f"P6 real GPU: agent / bare {agent_s / bare_s:.2f}x, default metrics "
        f"(target <= 1.5: {verdict}); nvidia-smi / agent {s / same_s:.1f}x on the same fields "
        f"(target >= 20: {smi_verdict}), {s / agent_s:.1f}x on the default metrics"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="simulated backend, 10 cycles")
    parser.add_argument(
        "--every-metric",
        action="store_true",
        help="agent and bare loop with every catalog metric on (the target is on the default)",
    )
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
            real(args.cycles, client, args.every_metric)
        finally:
            client.shutdown()
        return 0
    simulated(args.cycles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
