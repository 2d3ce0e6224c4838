"""P7: the scrape never waits for the pipeline.

The real agent runs as a child process (`python -m otelgpu run -c <pipeline>`):

- nvml, simulated, collection_interval 1s: the P3 node, its whole GPUs time-sliced between
  `--sharers` pods each so that /metrics holds ~10k series (per-process series mapped through
  a generated /proc tree);
- k8s_attributes against the protocol-faithful test kubelet (tests/peers/kubelet.py, gRPC on a
  unix socket, served by this process);
- prometheus on 127.0.0.1:<free port>;
- otlp (gRPC, gzip) to a real rotel receiver on loopback with its blackhole exporter.

A child process (so that this process's test kubelet never competes with it for the GIL)
scrapes /metrics back to back (one keep-alive connection, plain and gzip in turn, `--gap`
seconds between two scrapes) and times each from request to the last byte. The client reads
as Prometheus does: keep-alive, the whole body into one buffer kept from scrape to scrape, with
reads as large as what is left of the body (`Scraper`; `http.client`'s `read()` would build a
new ~6 MB bytes object per plain scrape, busy and paused alike). Phases alternate, `--rounds`
times: **busy** (the pipeline cycles every second) and **paused** (the same agent after a SIGHUP
reload to a cycle longer than the phase, scraped after the new receiver's collection and before
its next one, so only the exporter's own work and the scrapes remain). The figure is the busy
p99 / max over the paused ones, plain and gzip.

Like for like: the paused agent must serve the series the busy one does (a paused phase
serving fewer series, such as a collection without the GPM-derived ones, which need two
samples, times less work). Each phase starts once the new receiver has collected and the body
is whole, and the run stops with an error when the two phases' median bodies differ by more
than 1 %, and when the receiver's points counter moved during a paused phase (or stood still
during a busy one of at least two cycles).

The headline pools the scrapes of all pairs. Each pair's own ratio is printed too, with their
median: on a shared machine a stall from outside lands in one phase of one pair, and moves the
pooled p99 but only that pair's ratio (`--rounds 6` or more for a median worth reading).

Printed besides: p50/p99/max of each phase and kind, the body sizes, the agent's CPU per second
in each phase (what the GIL switch interval could cost the pipeline shows there), the load
average before and after (the machine is shared: compare figures of one run), and the **floor**:
the same numbers of bytes over bare loopback TCP in the scraping process, no HTTP, no agent.
A plain p99 near the floor's is as good as this machine allows. The floor is measured twice:
with the agent quiet, and while its pipeline runs (1 s cycle, the agent not scraped), which is
what a `/metrics` served from outside the agent's GIL (another process, sharing only the
cores) could do at best here. Then **own process**: copies of the agent's two bodies served
by the agent's own HTTP stack from a process of its own (`bench/p7_own_process.py`), scraped
the same way while the pipeline runs and when it is quiet: what serving `/metrics` from a
separate process would give, before the cost of handing it each body.

Inside the agent (with `--probe`, it runs under `bench/p7_probe.py`, which records without
changing any setting; without it, the agent runs bare and none of this is printed): its
garbage collections per phase (rate, pause p99 and max by generation, the objects a full pass
walks), the slowest 2 % of busy scrapes of each kind with what overlapped them (a collection,
the receiver's collect, the Prometheus ingest/render/gzip, the OTLP encode) against the share
of all busy scrapes those overlap, and each agent thread's CPU, run-queue wait and how often the
HTTP thread blocked per scrape. `P7_EXPERIMENT=alt=2;<setting>` runs an A/B inside one run
(the setting in odd 2 s slots of the clock, the defaults in even ones) and prints the p99 of
each half: on a shared machine that is fairer than comparing two runs (docs/dev/p7.md).
`P7_EXPERIMENT=fork=SECONDS` forks the agent that long after its start into a child that only
serves, and prints the child's private memory over the run: what a serving process forked
from the agent would cost.

    python bench/p7_scrape_never_waits.py [--seconds 15] [--rounds 2] [--sharers 68]
    python bench/p7_scrape_never_waits.py --smoke      # a tiny node, 0.5 s phases, ~10 s
    python bench/p7_scrape_never_waits.py --cpu-limit 200m   # as under a container CPU limit

`--cpu-limit` runs the agent under the CFS quota a container's `resources.limits.cpu` becomes
(bench/cpu_quota.py; needs root and a writable cgroup file system) and prints in how many of
the 100 ms periods of each phase it was throttled. The DaemonSet and the chart set no CPU limit
because of what this shows at 200m (docs/deploy.md, "Resources").

Target: busy/paused p99 ratio <= 1.5 and busy p99 <= 5 ms. The figure line is last.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import http.client
import json
import math
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cpu_quota import PERIOD_US, CpuQuota, Throttled, millicores
from bench.node_fixture import Node
from bench.p3_rss import kubelet_for, rotel_blackhole, status_field
from bench.p7_probe import inside_report
from otelgpu.config.types import parse_duration
from tests.peers.rotel import free_port

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("plain", "gzip", "plain_at", "gzip_at", "plain_bytes", "gzip_bytes")
# The gzip scrape asks as Prometheus 3 does (seen on the wire; tests/unit/exporters/prometheus/
# test_negotiation.py): OpenMetrics first, so the agent serves and pre-renders the OpenMetrics
# body, as it does for a real Prometheus. The plain scrape asks as curl does (no Accept: the
# classic text). Asking for classic text alone would spare the agent the OpenMetrics body.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
    "application/openmetrics-text;version=0.0.1;q=0.5,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)
LIKE_FOR_LIKE = 0.01  # the most the two phases' median body sizes may differ by, relatively
PAUSE_MARGIN = 2.0  # seconds of a paused cycle left after its scrapes (and polling) are done
RELOADED = b"otelgpu_config_last_reload_success_timestamp_seconds"
POINTS = b'otelgpu_receiver_points_total{receiver="nvml"}'
WATCHED = (RELOADED, POINTS)
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 25.0


def pipeline(
    node: Node, host_proc: Path, kubelet: Path, otlp: str, interval: str
) -> dict[str, Any]:
    port = free_port()
    return {
        "receivers": {"nvml": node.receiver_config(host_proc, interval)},
        "processors": {
            "k8s_attributes": {"pod_resources_socket": str(kubelet), "node_name": "gpu-node-1"}
        },
        "exporters": {
            # per_holder: a time-sliced GPU's series once per holding pod, as P3's 10k node
            "prometheus": {"endpoint": f"127.0.0.1:{port}", "shared_gpu_series": "per_holder"},
            "otlp": {"endpoint": otlp, "tls": {"insecure": True}},
        },
        "service": {
            "pipelines": {
                "metrics/gpu": {
                    "receivers": ["nvml"],
                    "processors": ["k8s_attributes"],
                    "exporters": ["prometheus", "otlp"],
                }
            }
        },
    }


class Scraper:
    """Scrapes /metrics on one keep-alive connection, plain and gzip in turn, as Prometheus
    does: the whole body is read into one buffer reused from scrape to scrape (Prometheus
    keeps a pool of scrape buffers), with reads as large as what is left of the body. Each
    answer is timed from the request sent to its last byte read, in milliseconds.

    (Before: `response.read()` allocated a new body each time, ~6 MB for 10k series here, and
    the page faults of that fresh allocation were part of every plain figure, busy and paused.)
    """

    def __init__(self, port: int, gap: float) -> None:
        self._port = port
        self._gap = gap
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self._buffer = bytearray(1 << 20)
        self.size = 0  # bytes of the last answer's body

    def get(self, gzip: bool, *, keep: bool = False) -> tuple[float, bytes]:
        """The time of one answer and, when `keep`, its body."""
        headers = (
            {"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"}
            if gzip
            else {"Accept-Encoding": "identity"}
        )
        started = time.perf_counter()
        try:
            size = self._exchange(headers)
        except (OSError, http.client.HTTPException):
            self._conn.close()  # the agent closed an idle connection: reconnect once
            self._conn = http.client.HTTPConnection("127.0.0.1", self._port, timeout=10)
            started = time.perf_counter()
            size = self._exchange(headers)
        elapsed = (time.perf_counter() - started) * 1000
        self.size = size
        return elapsed, bytes(self._buffer[:size]) if keep else b""

    def _exchange(self, headers: dict[str, str]) -> int:
        self._conn.request("GET", "/metrics", headers=headers)
        response = self._conn.getresponse()
        if response.status != 200 or response.length is None:
            raise RuntimeError(f"/metrics answered {response.status} (length {response.length})")
        size = response.length
        if len(self._buffer) < size:
            self._buffer = bytearray(size * 2)
        view = memoryview(self._buffer)
        got = 0
        while got < size:
            read = response.readinto(view[got:size])
            if not read:
                raise http.client.IncompleteRead(bytes(view[:got]), size - got)
            got += read
        return size

    def run(self, seconds: float) -> dict[str, list[float]]:
        """Milliseconds of each answer by kind, (under `<kind>_at`) the monotonic clock
        when each was asked, to line scrapes up with what happened in the agent, and (under
        `<kind>_bytes`) the size of each body."""
        times: dict[str, list[float]] = {key: [] for key in KEYS}
        deadline = time.monotonic() + seconds
        gzip = False
        while time.monotonic() < deadline:
            asked = time.monotonic()
            elapsed, _ = self.get(gzip)
            kind = "gzip" if gzip else "plain"
            times[kind].append(elapsed)
            times[f"{kind}_at"].append(asked)
            times[f"{kind}_bytes"].append(self.size)
            gzip = not gzip
            time.sleep(self._gap)
        return times

    def close(self) -> None:
        self._conn.close()


def scrape_for(port: int, gap: float, seconds: float) -> dict[str, list[float]]:
    """Runs in the scraping child process."""
    scraper = Scraper(port, gap)
    try:
        return scraper.run(seconds)
    finally:
        scraper.close()


def floor_for(sizes: tuple[int, int], gap: float, seconds: float) -> dict[str, list[float]]:
    """Runs in the scraping child process: what moving bodies of these sizes through loopback
    TCP costs on this machine right now, with no HTTP and no agent: a thread in this process
    answers each one-byte request with `sendall`, the client reads into a reused buffer.
    The plain figure cannot go below this."""
    listening = socket.create_server(("127.0.0.1", 0))
    bodies = [b"x" * size for size in sizes]

    def serve() -> None:
        conn, _ = listening.accept()
        with conn:
            while (asked := conn.recv(1)) != b"":
                conn.sendall(bodies[asked[0]])

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    times: dict[str, list[float]] = {"plain": [], "gzip": []}
    buffer = memoryview(bytearray(max(sizes)))
    with socket.create_connection(listening.getsockname()) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for index, kind in enumerate(("plain", "gzip")):
                started = time.perf_counter()
                client.sendall(bytes([index]))
                got = 0
                while got < sizes[index]:
                    got += client.recv_into(buffer[got : sizes[index]])
                times[kind].append((time.perf_counter() - started) * 1000)
                time.sleep(gap)
    server.join()
    listening.close()
    return times


def agent_cpu(pid: int) -> float:
    """CPU seconds the agent has used (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def agent_threads(pid: int) -> dict[int, tuple[float, float, float]]:
    """Each agent thread's CPU seconds, seconds spent runnable but waiting for a core
    (schedstat's run delay) and times it blocked (voluntary context switches: waiting for
    the GIL or for the network), by thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            delay = int((task / "schedstat").read_text().split()[1]) / 1e9
            status = (task / "status").read_text()
            blocked = float(status.split("voluntary_ctxt_switches:")[1].split()[0])
            out[int(task.name)] = (cpu, delay, blocked)
    return out


def thread_lines(out: dict[str, Any], seconds: float) -> list[str]:
    """Per phase, the agent's threads by role (as the probe named them; the others together):
    CPU ms/s, ms/s waiting for a core, and for the HTTP thread how often it blocked a scrape."""
    names = out["probe"]["thread_ids"]
    lines = []
    for phase in ("busy", "paused"):
        roles: dict[str, list[float]] = {}
        for tid, use in out["thread_use"][phase].items():
            role = roles.setdefault(names.get(str(tid), "other"), [0.0, 0.0, 0.0])
            for index in range(3):
                role[index] += use[index]
        scrapes = sum(len(out["results"][phase][kind]) for kind in ("plain", "gzip"))
        parts = [
            f"{role} {cpu * 1000 / seconds:.0f}/{delay * 1000 / seconds:.1f}"
            for role, (cpu, delay, _) in sorted(roles.items())
        ]
        blocked = roles.get("http", [0.0, 0.0, 0.0])[2] / max(1, scrapes)
        lines.append(
            f"agent threads {phase:6} (CPU ms/s / waiting for a core ms/s): {', '.join(parts)}; "
            f"the HTTP thread blocked {blocked:.1f} times a scrape"
        )
    return lines


def alternate_report(results: dict[str, dict[str, list[float]]], period: float) -> list[str]:
    """With `P7_EXPERIMENT=alt=SECONDS;...` the agent holds the experiment's settings in odd
    slots of the monotonic clock (B) and its defaults in even ones (A): p99 of each half."""
    lines = []
    p99: dict[tuple[str, str, int], float] = {}
    for phase in ("busy", "paused"):
        for kind in ("plain", "gzip"):
            halves: tuple[list[float], list[float]] = ([], [])
            for at, ms in zip(results[phase][f"{kind}_at"], results[phase][kind], strict=True):
                halves[int(at // period) % 2].append(ms)
            for arm in (0, 1):
                p99[phase, kind, arm] = percentile(halves[arm], 0.99) if halves[arm] else math.nan
    for kind in ("plain", "gzip"):
        parts = []
        for arm, name in ((0, "A"), (1, "B")):
            busy, paused = p99["busy", kind, arm], p99["paused", kind, arm]
            ratio = busy / paused if paused else math.nan
            parts.append(f"{name} busy {busy:.2f} paused {paused:.2f} ratio {ratio:.2f}")
        lines.append(f"alternating {kind:5} p99 ms: {'; '.join(parts)}")
    return lines


def pooled(pairs: list[dict[str, dict[str, list[float]]]]) -> dict[str, dict[str, list[float]]]:
    """Each phase's scrapes (times, when and body sizes) over all pairs, in order."""
    return {
        phase: {key: [v for pair in pairs for v in pair[phase][key]] for key in KEYS}
        for phase in ("busy", "paused")
    }


def pair_lines(pairs: list[dict[str, dict[str, list[float]]]]) -> list[str]:
    """The busy/paused p99 ratio of each busy+paused pair of phases on its own, and their
    median. The headline pools every scrape of all pairs, so one disturbance from outside (a
    100 ms stall of the machine) that lands in one phase moves it; here it moves one pair."""
    lines = []
    for kind in ("plain", "gzip"):
        ratios = []
        for pair in pairs:
            busy, paused = pair["busy"][kind], pair["paused"][kind]
            if busy and paused:
                ratios.append(percentile(busy, 0.99) / percentile(paused, 0.99))
        if not ratios:
            continue
        counted = f"{len(ratios)} pair{'s' if len(ratios) > 1 else ''}"
        lines.append(
            f"per pair {kind:5}: busy/paused p99 ratio {' '.join(f'{r:.2f}' for r in ratios)}; "
            f"median {statistics.median(ratios):.2f} of {counted}"
        )
    return lines


def series_in(body: bytes) -> int:
    return sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), percentile(values, 0.99), max(values)


def bodies(port: int) -> tuple[bytes, bytes]:
    """One plain and one gzip answer's bodies (the gzip one asked for as Prometheus does)."""
    scraper = Scraper(port, 0)
    try:
        return scraper.get(False, keep=True)[1], scraper.get(True, keep=True)[1]
    finally:
        scraper.close()


@contextlib.contextmanager
def own_process(tmp: Path, plain: bytes, gzipped: bytes) -> Iterator[tuple[int, int]]:
    """`bench/p7_own_process.py` serving these bodies; yields its port and pid."""
    (tmp / "own.plain").write_bytes(plain)
    (tmp / "own.gzip").write_bytes(gzipped)
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "p7_own_process.py"),
            *(str(tmp / f"own.{k}") for k in ("plain", "gzip")),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        yield int(server.stdout.readline()), server.pid
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def plain_body(port: int) -> bytes:
    """One plain answer's body, on a connection of its own."""
    scraper = Scraper(port, 0)
    try:
        return scraper.get(False, keep=True)[1]
    finally:
        scraper.close()


async def _wait_series(port: int, want: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    seen = 0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the agent exited with {proc.returncode}")
        with contextlib.suppress(OSError, http.client.HTTPException, RuntimeError):
            seen = series_in(plain_body(port))
            if seen >= want:
                return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"/metrics never reached {want} series (last seen {seen})")


def self_telemetry(port: int) -> tuple[int, dict[bytes, float]]:
    """The size of a plain body and the values in it of the agent's own series in WATCHED
    (0 for one not there yet)."""
    body = plain_body(port)
    found = dict.fromkeys(WATCHED, 0.0)
    for name in WATCHED:
        at = body.find(b"\n" + name + b" ")
        if at >= 0:
            line = body[at + 1 : body.find(b"\n", at + 1)]
            found[name] = float(line.rsplit(b" ", 1)[1])
    return len(body), found


async def reload_until_full(
    proc: subprocess.Popen[bytes],
    path: Path,
    config: dict[str, Any],
    interval: str,
    port: int,
    full: int,
) -> None:
    """Reloads the agent to this collection interval and returns once the new receiver has
    collected (its points counter moved after the reload was seen) and the plain body is
    `full` bytes (within LIKE_FOR_LIKE). The old series are served until the new receiver's
    first collection replaces them (the body is waited for, not assumed). With `full` 0, it
    returns once the reload is done."""
    _, before = await asyncio.to_thread(self_telemetry, port)
    config["receivers"]["nvml"]["collection_interval"] = interval
    # Series must outlive two collections (validate refuses less): the quiet hour keeps its one.
    expiration = max(300.0, 2 * parse_duration(interval))
    config["exporters"]["prometheus"]["metric_expiration"] = f"{expiration:g}s"
    path.write_text(json.dumps(config, indent=1))
    os.kill(proc.pid, signal.SIGHUP)
    # two cycles (of the phases' lengths; the 1 h one needs only the reload)
    deadline = time.monotonic() + READY_TIMEOUT + 2 * min(parse_duration(interval), READY_TIMEOUT)
    size, reloaded = 0, None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the agent exited with {proc.returncode}")
        size, now = await asyncio.to_thread(self_telemetry, port)
        if now[RELOADED] != before[RELOADED]:
            if not full:
                return
            if reloaded is None:
                reloaded = now[POINTS]
            elif now[POINTS] > reloaded and size >= (1 - LIKE_FOR_LIKE) * full:
                return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"after a reload to {interval}, /metrics stayed at {size} of {full} B")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


async def measure(
    args: argparse.Namespace, node: Node, tmp: Path, otlp: str, quota: CpuQuota | None
) -> dict[str, Any]:
    host_proc = node.write_host_proc(tmp / "proc")
    async with kubelet_for(node) as kubelet:
        config = pipeline(node, host_proc, kubelet.socket, otlp, "1s")
        path = tmp / "pipeline.yaml"
        path.write_text(json.dumps(config, indent=1))
        port = int(config["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1])
        log = (tmp / "agent.log").open("wb")
        spawn = multiprocessing.get_context("spawn")
        pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn)
        probe = tmp / "probe.json"
        launcher = (
            ["-m", "otelgpu"]
            if not args.probe
            else [str(ROOT / "bench" / "p7_probe.py"), str(probe)]
        )
        proc = subprocess.Popen(
            [sys.executable, *launcher, "run", "-c", str(path)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        if quota is not None:  # before the agent starts its threads: they inherit the cgroup
            quota.add(proc.pid)
        throttled = {"busy": Throttled(0, 0, 0.0), "paused": Throttled(0, 0, 0.0)}
        try:
            await _wait_series(port, args.min_series, proc)
            await asyncio.sleep(args.warmup)
            plain, gzipped = await asyncio.to_thread(bodies, port)  # also served by own_process
            plain_bytes, gzip_bytes, series = len(plain), len(gzipped), series_in(plain)
            cpu_used = {"busy": 0.0, "paused": 0.0}
            windows: list[tuple[str, float, float]] = []
            thread_use: dict[str, dict[int, list[float]]] = {"busy": {}, "paused": {}}
            pairs: list[dict[str, dict[str, list[float]]]] = []
            # Paused = between two collections of a cycle longer than the phase, once the
            # body is whole (the checks below and `unlike` hold it to the busy one's series).
            pause = args.seconds + 2 * args.settle + PAUSE_MARGIN
            for _ in range(args.rounds):
                pairs.append({})
                for phase, interval in (("busy", "1s"), ("paused", f"{pause * 1000:.0f}ms")):
                    await reload_until_full(proc, path, config, interval, port, plain_bytes)
                    await asyncio.sleep(args.settle)
                    _, before = await asyncio.to_thread(self_telemetry, port)
                    cpu = agent_cpu(proc.pid)
                    stopped = quota.throttled() if quota is not None else None
                    threads = agent_threads(proc.pid)
                    began = time.monotonic()
                    times = await asyncio.get_running_loop().run_in_executor(
                        pool, scrape_for, port, args.gap, args.seconds
                    )
                    cpu_used[phase] += agent_cpu(proc.pid) - cpu
                    if quota is not None and stopped is not None:
                        throttled[phase] += quota.throttled() - stopped
                    windows.append((phase, began, time.monotonic()))
                    for tid, now in agent_threads(proc.pid).items():
                        then = threads.get(tid, (0.0, 0.0, 0.0))
                        per_thread = thread_use[phase].setdefault(tid, [0.0, 0.0, 0.0])
                        for index in range(3):
                            per_thread[index] += now[index] - then[index]
                    pairs[-1][phase] = times
                    if proc.poll() is not None:
                        raise RuntimeError(f"the agent exited with {proc.returncode}")
                    _, after = await asyncio.to_thread(self_telemetry, port)
                    collected = after[POINTS] != before[POINTS]
                    # (a busy phase shorter than two 1 s cycles, as in --smoke, may see none)
                    if collected if phase == "paused" else not collected and args.seconds >= 2:
                        raise RuntimeError(
                            f"the {phase} phase's receiver went from {before[POINTS]:.0f} to "
                            f"{after[POINTS]:.0f} points: it was not {phase}"
                        )
            # the floor again while the pipeline runs (1 s cycle), the agent not scraped: what
            # a server sharing no GIL with the pipeline, only the cores, could do here
            floors: dict[str, dict[str, list[float]]] = {}
            # and the agent's bodies served by its HTTP stack from a process of its own
            owns: dict[str, dict[str, list[float]]] = {}
            with own_process(tmp, plain, gzipped) as (own_port, own_pid):
                for phase, interval in (("busy", "1s"), ("quiet", "1h")):
                    # quiet: one last collection, then none for an hour
                    full = plain_bytes if phase == "busy" else 0
                    await reload_until_full(proc, path, config, interval, port, full)
                    await asyncio.sleep(args.settle)
                    floors[phase] = await asyncio.get_running_loop().run_in_executor(
                        pool, floor_for, (plain_bytes, gzip_bytes), args.gap, min(args.seconds, 5.0)
                    )
                    owns[phase] = await asyncio.get_running_loop().run_in_executor(
                        pool, scrape_for, own_port, args.gap, min(args.seconds, 5.0)
                    )
                own_rss = status_field(own_pid, "VmRSS") / 2**20
        except BaseException:
            log.close()
            print((tmp / "agent.log").read_text(errors="replace")[-3000:], file=sys.stderr)
            raise
        finally:
            await asyncio.to_thread(_stop, proc)
            pool.shutdown()
            log.close()
    inside = json.loads(probe.read_text()) if probe.exists() else None
    return {
        "probe": inside,
        "windows": windows,
        "thread_use": thread_use,
        "series": series,
        "results": pooled(pairs),
        "pairs": pairs,
        "floor": floors["quiet"],
        "floor_busy": floors["busy"],
        "own_process": owns,
        "own_process_rss": own_rss,
        "cpu_per_second": {k: v / (args.rounds * args.seconds) for k, v in cpu_used.items()},
        "plain_bytes": plain_bytes,
        "gzip_bytes": gzip_bytes,
        "throttled": throttled if quota is not None else None,
    }


def unlike(results: dict[str, dict[str, list[float]]]) -> list[str]:
    """What makes the two phases not like for like: each kind whose median body size differs
    between busy and paused by more than LIKE_FOR_LIKE (the paused agent must serve the very
    series the busy one does, or its times are of other work)."""
    problems = []
    for kind in ("plain", "gzip"):
        busy = statistics.median(results["busy"][f"{kind}_bytes"])
        paused = statistics.median(results["paused"][f"{kind}_bytes"])
        if abs(busy - paused) > LIKE_FOR_LIKE * busy:
            problems.append(f"{kind} bodies were {busy:.0f} B busy but {paused:.0f} B paused")
    return problems


async def main(args: argparse.Namespace) -> None:
    if args.smoke:
        node = Node(gpus=2, mig_gpus=0, pods=4, sharers=1)
        args.seconds, args.rounds, args.min_series = 0.5, 1, 1
        args.warmup = 2.5  # two 1 s cycles: the body has its GPM series
        args.settle = 0.5
    else:
        node = Node(sharers=args.sharers)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (before)")
    if os.environ.get("P7_EXPERIMENT") and not args.probe:
        raise SystemExit("P7_EXPERIMENT needs the probe (add --probe)")
    if os.environ.get("P7_EXPERIMENT"):
        print(f"experiment (bench/p7_probe.py): {os.environ['P7_EXPERIMENT']}")
    print(f"threads: GIL switch interval {sys.getswitchinterval() * 1000:.1f} ms (this process)")
    with tempfile.TemporaryDirectory(prefix="p7-", dir="/tmp") as tmp_name:
        tmp = Path(tmp_name)
        quota = CpuQuota(args.cpu_limit) if args.cpu_limit else None
        with rotel_blackhole(tmp / "rotel") as otlp, quota or contextlib.nullcontext():
            out = await measure(args, node, tmp, otlp, quota)
    results = out["results"]
    problems = unlike(results)
    if problems:
        raise SystemExit(
            f"P7 not like for like: {'; '.join(problems)}: the paused agent served other series"
        )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (after)")
    figures: dict[str, dict[str, tuple[float, float, float]]] = {}
    for phase in ("busy", "paused"):
        figures[phase] = {}
        for kind in ("plain", "gzip"):
            values = results[phase][kind]
            figures[phase][kind] = p50, p99, top = summary(values)
            size = statistics.median(results[phase][f"{kind}_bytes"])
            print(
                f"{phase:6} {kind:5}: {len(values):5} scrapes, p50 {p50:7.2f} ms, "
                f"p99 {p99:7.2f} ms, max {top:7.2f} ms, body {size:.0f} B"
            )
    for line in pair_lines(out["pairs"]):
        print(line)
    for kind in ("plain", "gzip"):
        p50, p99, top = summary(out["floor"][kind])
        print(
            f"floor  {kind:5}: the same bytes over bare loopback TCP, no HTTP: p50 {p50:7.2f} ms, "
            f"p99 {p99:7.2f} ms, max {top:7.2f} ms"
        )
    for kind in ("plain", "gzip"):
        p50, p99, top = summary(out["floor_busy"][kind])
        print(
            f"floor  {kind:5}, while the pipeline runs (no GIL shared with it): p50 {p50:7.2f} "
            f"ms, p99 {p99:7.2f} ms, max {top:7.2f} ms (p99 x{p99 / figures['paused'][kind][1]:.2f}"
            f" the paused agent's)"
        )
    for kind in ("plain", "gzip"):
        busy, quiet = (summary(out["own_process"][phase][kind]) for phase in ("busy", "quiet"))
        print(
            f"own process {kind:5}: the agent's HTTP stack serving its bodies from another "
            f"process (no GIL shared with the pipeline): p99 {busy[1]:.2f} ms while the pipeline "
            f"runs, {quiet[1]:.2f} ms quiet (ratio {busy[1] / quiet[1]:.2f}); p50 {busy[0]:.2f} / "
            f"{quiet[0]:.2f} ms"
        )
    print(
        f"own process: VmRSS {out['own_process_rss']:.1f} MiB (a fresh interpreter with the HTTP "
        "stack and both bodies; what a serving process started afresh would add to the agent's "
        "memory; for one forked from the agent, see P7_EXPERIMENT=fork=)"
    )
    experiment = os.environ.get("P7_EXPERIMENT", "")
    if "alt=" in experiment:
        for line in alternate_report(results, float(experiment.split("alt=")[1].split(";")[0])):
            print(line)
    if out["probe"] is not None:
        for line in inside_report(out["probe"], out["windows"], results):
            print(line)
        for line in thread_lines(out, args.rounds * args.seconds):
            print(line)
    if quota is not None:
        for line in quota_lines(quota, out["throttled"], args.rounds * args.seconds):
            print(line)
    cpu = out["cpu_per_second"]
    print(
        f"agent CPU while scraped: busy {cpu['busy'] * 1000:.0f} ms/s, "
        f"paused {cpu['paused'] * 1000:.0f} ms/s"
    )
    parts = []
    ok = True
    for kind in ("plain", "gzip"):
        busy, paused = figures["busy"][kind], figures["paused"][kind]
        ratio_p99, ratio_max = busy[1] / paused[1], busy[2] / paused[2]
        met = ratio_p99 <= 1.5 and busy[1] <= 5.0
        ok = ok and met
        print(
            f"{kind:5} busy/paused: p99 ratio {ratio_p99:.2f} (<= 1.5: "
            f"{'ok' if ratio_p99 <= 1.5 else 'MISSED'}), busy p99 {busy[1]:.2f} ms (<= 5 ms: "
            f"{'ok' if busy[1] <= 5.0 else 'MISSED'}), max ratio {ratio_max:.2f}"
        )
        parts.append(
            f"{kind} p99 {busy[1]:.2f} ms (paused {paused[1]:.2f}, ratio {ratio_p99:.2f}), "
            f"max {busy[2]:.2f} ms (ratio {ratio_max:.2f}) {'met' if met else 'MISSED'}"
        )
    print(
        f"P7 scrape while the pipeline runs vs paused, {out['series']} series "
        f"({out['plain_bytes']} B plain, {out['gzip_bytes']} B gzip), 1 s cycle, OTLP on"
        f"{f', CPU limit {args.cpu_limit}m' if args.cpu_limit else ''}: "
        f"{'; '.join(parts)} (target ratio <= 1.5, p99 <= 5 ms: {'met' if ok else 'MISSED'})"
    )


def quota_lines(quota: CpuQuota, throttled: dict[str, Throttled], seconds: float) -> list[str]:
    """What the CPU limit did in each phase: the 100 ms periods in which the agent's threads
    were stopped for the rest of the period, and the kernel's throttled time per second (it
    adds up each CPU's, so it can pass 1000 ms/s)."""
    lines = [
        f"cpu limit {quota.millicores}m: a CFS quota of {quota.quota_us // 1000} ms per "
        f"{PERIOD_US // 1000} ms period on the agent (bench/cpu_quota.py)"
    ]
    for phase in ("busy", "paused"):
        stat = throttled[phase]
        lines.append(
            f"cpu limit {phase:6}: throttled in {stat.throttled} of {stat.periods} periods "
            f"({100 * stat.throttled / max(stat.periods, 1):.0f} %), throttled "
            f"{stat.seconds * 1000 / seconds:.0f} ms/s (summed over CPUs)"
        )
    return lines


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15, help="seconds per phase")
    parser.add_argument("--rounds", type=int, default=2, help="busy+paused phase pairs")
    parser.add_argument("--warmup", type=float, default=5, help="seconds before the first phase")
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds after a SIGHUP before sampling"
    )
    parser.add_argument("--gap", type=float, default=0.02, help="seconds between two scrapes")
    parser.add_argument(
        "--sharers", type=int, default=68, help="pods sharing each whole GPU (~10k series)"
    )
    parser.add_argument("--min-series", type=int, default=10_000, help="wait for this many")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="run the agent under bench/p7_probe.py's hooks and print what it saw (the figures "
        "are then of a probed agent; without it the agent runs as `python -m otelgpu`)",
    )
    parser.add_argument(
        "--cpu-limit",
        type=millicores,
        help="run the agent under a CFS CPU quota, as a container's resources.limits.cpu does "
        "(200m, 1, ...; needs root and a writable cgroup file system)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny node, 0.5 s phases (the smoke test)"
    )
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_args()))
