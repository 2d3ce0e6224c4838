"""P3: the agent's resident memory in steady state, with every component and real peers.

The real agent runs as a child process (`python -m otelgpu run -c <pipeline>`):

- nvml, simulated: 8 GPUs, 3 MIG instances on each of the first 2, 2 processes per device
  (pids mapped to containers through a generated /proc tree), collection_interval 1s;
- k8s_attributes against the protocol-faithful test kubelet (tests/peers/kubelet.py, gRPC on a
  unix socket, served by this process) listing 500 pods, the GPU holders among them;
- container_env against a real private containerd (tests/peers/runtime.py) holding CRI
  records for all 500 pods (a sandbox with pod labels, a `main` container with env), with env
  TEAM/PROJECT and one pod label included;
- prometheus on 127.0.0.1:<free port>, scraped by this process every second as Prometheus 3
  scrapes (its Accept header, OpenMetrics first, and `Accept-Encoding: gzip`; the bench
  checks that the answer is gzipped OpenMetrics);
- otlp (gRPC, gzip) to a real rotel receiver on loopback with its blackhole exporter.

After a warm-up, VmRSS (from /proc/<pid>/status) is sampled every second; the median and the
max of the window are reported, with VmHWM and the series count on /metrics. The 10k variant
time-slices every whole GPU between many pods (`::<n>` replica IDs: one allocation series per
holder) and runs many processes per device (MPS-style: per-process series) until /metrics
holds at least 10k series.

The agent runs with the environment the image's Dockerfile gives it (every `ENV` of its final
stage but PATH: the allocator settings among them; printed; `--no-image-env` drops them for a
comparison); the DaemonSet sets the same (tests/deploy checks they agree). Then the import
breakdown of the small run (bench/p3_imports.py): a fresh interpreter, under the same
environment, imports the modules the agent imported (from `-X importtime`), one group at a
time (ssl, stdlib, pydantic, yaml, grpc, protobuf, other third-party, otelgpu), and the RSS
after each group is printed; the agent's data is its median RSS minus the RSS with everything
imported. `--census` adds a traced run of each node (bench/p3_census.py: who allocated and who
holds the data; its RSS is no figure) and the imports census: each module's own cost and the
chain that imported it.

Every figure is printed before the peers stop (stopping 1000 containers takes minutes). To
compare, on the same peers and alternating runs: `--repeat N` runs each agent N times (the
figures are then the median of the runs' medians, with min and max); `--baseline-root DIR`
also runs the agent of another source tree (its otelgpu, its Dockerfile's environment),
`--ab-env KEY=VALUE[,KEY=VALUE]` this tree's with more environment (both repeatable). Each
tree's otelgpu is byte-compiled first, as the image's install does.

`--otlp-down` adds a run whose OTLP endpoint refuses connections (a loopback port nothing
listens on) at ~7k series (`--down-procs`): sampling starts once the sending queue is full (the
exporter has refused a batch) and the warm-up after that has passed; its line gives the RSS, the
queue gauge (in the sizer's unit) and the points dropped. Target: <= 100 MiB (R4: a full
default queue fits the memory limit).

    python bench/p3_rss.py [--warmup 10] [--seconds 30] [--sharers 60] [--procs 300] [--small-only]
    python bench/p3_rss.py --otlp-down [--down-procs 190]
    python bench/p3_rss.py --small-only --repeat 3 [--baseline-root DIR] [--ab-env K=V] [--census]
    python bench/p3_rss.py --smoke     # a few seconds, tiny node, no targets (tests use it)

Targets (TARGETS.md, P3): <= 64 MiB at 8 GPUs / 500 pods, <= 100 MiB at 10k series. The figure
line is last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import site
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from bench import p3_census, p3_imports
from bench.node_fixture import Node
from otelgpu.confighttp.compression import gunzip_bytes
from tests.peers.containerd_tasks import stop_task, task_states
from tests.peers.kubelet import FakeKubelet, container, pod
from tests.peers.ports import free_port
from tests.peers.rotel import rotel_binary
from tests.peers.runtime import containerd_daemon

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
AGENT_READY_TIMEOUT = 40.0
QUEUE_FULL_TIMEOUT = 300.0  # --otlp-down: seconds for the sending queue to fill
STOP_TIMEOUT = 25.0
SMALL_TARGET, LARGE_TARGET, DOWN_TARGET = 64 * MIB, 100 * MIB, 100 * MIB
# How Prometheus 3 asks for /metrics (headers seen from a real Prometheus 3.5.3 with its default
# scrape settings): the Accept header its default `scrape_protocols` build (OpenMetrics 1.0.0,
# OpenMetrics 0.0.1, text 1.0.0, text 0.0.4, then anything, `escaping=allow-utf-8` on the two
# formats that carry it; tests/unit/exporters/prometheus/test_negotiation.py holds the same
# value), gzip, its user agent and its scrape timeout (the default 10 s).
PROMETHEUS_3_HEADERS = {
    "Accept": (
        "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
        "application/openmetrics-text;version=0.0.1;q=0.5,"
        "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,"
        "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
    ),
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/3.5.3",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}


@dataclass
class Result:
    """One agent run's figures."""

    label: str
    rss: list[float]
    hwm: float
    series: int
    labelled: int
    otlp_sent: float
    queue: float  # the sending queue gauge, in the sizer's unit
    otlp_failed: float
    cpu: float  # the agent's CPU seconds per wall second over the window
    rss_file: float = 0.0  # of the last sample: file-backed pages (shared libraries, mostly)
    modules: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)  # the modules no other module imported
    regions: dict[str, float] = field(default_factory=dict)  # memory_map() of the last sample
    threads: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.rss)


_MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$")


def memory_map(pid: int) -> dict[str, float]:
    """Resident bytes by mapping, from /proc/<pid>/smaps: `[heap]` (glibc's main arena),
    `[anon]` (other arenas, pymalloc's arenas, big buffers, thread stacks), and each file
    (shared libraries) by its base name."""
    out: dict[str, float] = {}
    name = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        match = _MAPPING.match(line)
        if match:
            path = match[1].strip()
            base = path.rsplit("/", 1)[-1].split(".cpython-")[0]
            name = base if path.startswith("/") else (path or "[anon]")
        elif line.startswith("Rss:"):
            out[name] = out.get(name, 0.0) + float(line.split()[1]) * 1024
    return out


def print_map(result: Result) -> None:
    """The biggest resident mappings of the last sample, one line."""
    top = sorted(result.regions.items(), key=lambda kv: -kv[1])[:8]
    rest = sum(result.regions.values()) - sum(size for _, size in top)
    parts = [f"{name} {size / MIB:.1f}" for name, size in top] + [f"other {rest / MIB:.1f}"]
    print(
        f"  {result.label} resident by mapping (MiB): {', '.join(parts)}; {result.threads} threads"
    )


def status_field(pid: int, name: str) -> float:
    """A `kB` field of /proc/<pid>/status, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return float(line.split()[1]) * 1024
    raise KeyError(name)


def image_env(root: Path = ROOT) -> dict[str, str]:
    """The environment the image's Dockerfile gives the agent: every `ENV` of its final stage
    but PATH (the allocator settings, and whatever else the image sets)."""
    text = (root / "Dockerfile").read_text().replace("\\\n", " ")
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("FROM "):
            out = {}  # a build stage's ENV is not the image's
        if not line.startswith("ENV "):
            continue
        for token in line[4:].split():
            key, _, value = token.partition("=")
            if key != "PATH":
                out[key] = value.strip('"')
    return out


@contextlib.contextmanager
def rotel_blackhole(workdir: Path) -> Iterator[str]:
    """A real rotel OTLP receiver that drops what it gets (no debug log: it would cost this
    shared machine more CPU than the agent); yields its gRPC endpoint; stopped by its pid."""
    workdir.mkdir(parents=True, exist_ok=True)
    grpc_port, http_port = free_port(), free_port()
    args = [
        str(rotel_binary()),
        "start",
        "--exporter=blackhole",
        f"--otlp-grpc-endpoint=127.0.0.1:{grpc_port}",
        f"--otlp-http-endpoint=127.0.0.1:{http_port}",
        f"--pid-file={workdir / 'rotel.pid'}",
        f"--log-file={workdir / 'rotel.log'}",
    ]
    with (workdir / "stdout").open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not _listening(grpc_port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"rotel did not start: {(workdir / 'stdout').read_text()}")
            time.sleep(0.05)
        yield f"127.0.0.1:{grpc_port}"
    finally:
        _stop(proc)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@contextlib.asynccontextmanager
async def kubelet_for(node: Node) -> AsyncIterator[FakeKubelet]:
    """The test kubelet serving `node`'s pods (each with a GPU-less sidecar) on a socket."""
    kubelet = FakeKubelet()
    kubelet.set_pods(
        *(
            pod(ns, name, container("main", devices), container("sidecar"))
            for ns, name, devices in node.pod_devices()
        )
    )
    kubelet.set_allocatable(node.allocatable())
    await kubelet.start()
    try:
        yield kubelet
    finally:
        await kubelet.close()


def pipeline(
    node: Node, host_proc: Path, kubelet: Path, containerd: Path, otlp: str
) -> dict[str, Any]:
    """The pipeline file's content (written as JSON, which the YAML loader reads), with
    /metrics on a free loopback port."""
    port = free_port()
    return {
        "receivers": {"nvml": node.receiver_config(host_proc, "1s")},
        "processors": {
            "k8s_attributes": {"pod_resources_socket": str(kubelet), "node_name": "gpu-node-1"},
            "container_env": {
                "runtime": "containerd",
                "containerd": {"socket": str(containerd), "namespace": "k8s.io"},
                **node.container_env_options(),
            },
        },
        "exporters": {
            "prometheus": {"endpoint": f"127.0.0.1:{port}"},
            "otlp": {"endpoint": otlp, "tls": {"insecure": True}},
        },
        "service": {
            "pipelines": {
                "metrics/gpu": {
                    "receivers": ["nvml"],
                    "processors": ["k8s_attributes", "container_env"],
                    "exporters": ["prometheus", "otlp"],
                }
            }
        },
    }


def _census(proc: subprocess.Popen[bytes], out: Path, series: int, label: str) -> None:
    """Asks the agent for its census (SIGUSR2), waits for it, prints it."""
    os.kill(proc.pid, signal.SIGUSR2)
    deadline = time.monotonic() + 900  # walking a 10k agent's objects under tracemalloc: minutes
    while not out.with_suffix(".done").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the agent wrote no census")
        time.sleep(0.5)
    p3_census.print_census(label, out, series)


def _port(config: dict[str, Any]) -> int:
    return int(config["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1])


def parse_body(text: str) -> tuple[int, int, float, float]:
    """(series, series with container env labels, OTLP points sent, OTLP queue length) of a
    /metrics body."""
    series = labelled = 0
    sent = queue = 0.0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series += 1
        labelled += 'container_env_TEAM="' in line
        if 'exporter="otlp"' in line:
            if line.startswith("otelgpu_exporter_sent_points_total"):
                sent += float(line.rsplit(" ", 1)[1])
            elif line.startswith("otelgpu_exporter_queue_size"):
                queue += float(line.rsplit(" ", 1)[1])
    return series, labelled, sent, queue


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def otlp_failed(text: str) -> float:
    """Points the `otlp` exporter dropped (`otelgpu_exporter_failed_points_total`), from a
    /metrics body."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("otelgpu_exporter_failed_points_total") and 'exporter="otlp"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def session() -> aiohttp.ClientSession:
    """A client that leaves the gzip to `scrape` (Prometheus asks for it, and so do we)."""
    return aiohttp.ClientSession(auto_decompress=False)


async def scrape(session: aiohttp.ClientSession, port: int) -> str:
    """/metrics as Prometheus 3 gets it: asked with its headers, answered gzipped OpenMetrics
    (anything else means the bench measures another path than a real scrape's: an error)."""
    url = f"http://127.0.0.1:{port}/metrics"
    async with session.get(url, headers=PROMETHEUS_3_HEADERS) as response:
        response.raise_for_status()
        body = await response.read()
        kind = response.headers.get("Content-Type", "")
        coding = response.headers.get("Content-Encoding", "")
    if not kind.startswith("application/openmetrics-text") or coding != "gzip":
        raise RuntimeError(f"a Prometheus 3 scrape was answered {kind!r}, encoding {coding!r}")
    return gunzip_bytes(body).decode()


@dataclass(frozen=True)
class Tree:
    """What an agent run starts: the source tree its `otelgpu` comes from (this one, or another
    checkout to compare with: `--baseline-root`) and its environment."""

    tag: str  # "" for this tree
    root: Path
    env: dict[str, str]  # the agent's whole environment
    chosen: dict[str, str]  # what of it the image and the command line set (printed)


async def run_agent(
    label: str,
    node: Node,
    args: argparse.Namespace,
    peers: dict[str, Any],
    tree: Tree,
    *,
    census: bool = False,
    down: bool = False,
) -> Result:
    """Starts the agent of `tree` on `node`, waits, samples, stops it; returns the figures.
    `down`: its OTLP endpoint refuses connections, and sampling starts once the sending queue
    is full. `census`: started through p3_census.BOOT, and asked for its census."""
    tmp: Path = peers["tmp"] / re.sub(r"[^\w.-]+", "-", label)
    tmp.mkdir(parents=True)
    host_proc = node.write_host_proc(tmp / "proc")
    otlp = f"127.0.0.1:{free_port()}" if down else peers["otlp"]
    async with kubelet_for(node) as kubelet:
        config = pipeline(node, host_proc, kubelet.socket, peers["containerd"], otlp)
        (tmp / "pipeline.yaml").write_text(json.dumps(config, indent=1))
        # -X importtime: the log then lists every module the agent imported, for the
        # "interpreter + the agent's imports" baseline. With a census, the agent starts
        # through p3_census.BOOT, tracing allocations.
        start = ["-X", "tracemalloc=25", "-c", p3_census.BOOT] if census else ["-m", "otelgpu"]
        env = tree.env | {"P3_CENSUS_OUT": str(tmp / "census")}
        with (tmp / "agent.log").open("wb") as log:
            proc = subprocess.Popen(
                [*PYTHON, "-X", "importtime", *start, "run", "-c", str(tmp / "pipeline.yaml")],
                cwd=tree.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        try:
            result = await _sample(label, proc, _port(config), args, down)
            if census:
                await asyncio.to_thread(_census, proc, tmp / "census", result.series, label)
        except BaseException:
            print((tmp / "agent.log").read_text(errors="replace")[-3000:], file=sys.stderr)
            raise
        finally:
            await asyncio.to_thread(_stop, proc)
    text = (tmp / "agent.log").read_text(errors="replace")
    result.modules = p3_imports.imported_modules(text)
    result.roots = p3_imports.imported_modules(text, roots=True)
    return result


async def _sample(
    label: str, proc: subprocess.Popen[bytes], port: int, args: argparse.Namespace, down: bool
) -> Result:
    async with session() as client:
        # tracemalloc (--census) slows the agent's start several times
        await _wait_ready(client, proc, port, AGENT_READY_TIMEOUT * (5 if args.census else 1))
        if down:
            await _wait_queue_full(client, proc, port)
        await _tick(client, proc, port, args.warmup)
        rss: list[float] = []
        body = ""
        cpu, wall = cpu_seconds(proc.pid), time.monotonic()
        for _ in range(int(args.seconds)):
            body = await scrape(client, port)
            rss.append(status_field(proc.pid, "VmRSS"))
            await asyncio.sleep(1.0)
        hwm = status_field(proc.pid, "VmHWM")
        rss_file = status_field(proc.pid, "RssFile")
        regions = memory_map(proc.pid)
        threads = len(list(Path(f"/proc/{proc.pid}/task").iterdir()))
        load = (cpu_seconds(proc.pid) - cpu) / (time.monotonic() - wall)
    series, labelled, sent, queue = parse_body(body)
    return Result(
        label,
        rss,
        hwm,
        series,
        labelled,
        sent,
        queue,
        otlp_failed(body),
        load,
        rss_file,
        regions=regions,
        threads=threads,
    )


async def _wait_queue_full(
    session: aiohttp.ClientSession, proc: subprocess.Popen[bytes], port: int
) -> None:
    """Until the `otlp` exporter has dropped points: with its endpoint down, its queue is full."""
    deadline = time.monotonic() + QUEUE_FULL_TIMEOUT
    while not otlp_failed(await scrape(session, port)):
        if proc.poll() is not None:
            raise RuntimeError(f"the agent exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError("the OTLP sending queue did not fill")
        await asyncio.sleep(1.0)


async def _wait_ready(
    session: aiohttp.ClientSession, proc: subprocess.Popen[bytes], port: int, timeout: float
) -> None:
    """Until /metrics carries container env labels (every component is up and matching)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the agent exited with {proc.returncode}")
        with contextlib.suppress(aiohttp.ClientError):
            if parse_body(await scrape(session, port))[1]:
                return
        await asyncio.sleep(0.2)
    raise RuntimeError("the agent never served enriched series")


async def _tick(
    session: aiohttp.ClientSession, proc: subprocess.Popen[bytes], port: int, seconds: float
) -> None:
    """Scrapes once a second for `seconds` (the warm-up)."""
    for _ in range(int(seconds)):
        if proc.poll() is not None:
            raise RuntimeError(f"the agent exited with {proc.returncode}")
        await scrape(session, port)
        await asyncio.sleep(1.0)


def report(result: Result) -> str:
    trend = " ".join(f"{rss / MIB:.1f}" for rss in result.rss[::5])
    return (
        f"{result.label}: RSS median {result.median / MIB:.1f} MiB, max {max(result.rss) / MIB:.1f}"
        f" MiB ({len(result.rss)} samples 1 s apart; every 5th: {trend}), "
        f"VmHWM {result.hwm / MIB:.1f} MiB, file-backed {result.rss_file / MIB:.1f} MiB; "
        f"/metrics {result.series} series ({result.labelled} with container env labels); "
        f"OTLP points sent {result.otlp_sent:.0f}, dropped {result.otlp_failed:.0f}, queue gauge "
        f"{result.queue:.0f}; agent CPU {result.cpu * 100:.0f}% of a core"
    )


# How the agent's interpreter starts. By default without `site` (-S), its packages found through
# PYTHONPATH instead: `site` runs every .pth file of the machine's site-packages, and a build
# machine's own hooks (this one's sandbox CA injector imports certifi, importlib.resources,
# tempfile and more: ~5 MiB) are not in the image. `--site-hooks` keeps them.
PYTHON = [sys.executable, "-S"]


def agent_env(
    *, image: bool = True, site_hooks: bool = True, root: Path = ROOT
) -> tuple[dict[str, str], dict[str, str]]:
    """(the agent's whole environment, the image settings in it): the environment `root`'s
    Dockerfile gives the agent unless `image` is off; without `site_hooks`, packages found
    through PYTHONPATH, `root` first (for an interpreter started with -S, see PYTHON)."""
    chosen = image_env(root) if image else {}
    ours = ("MALLOC_", "PYDANTIC_", "GRPC_", *image_env(root))
    env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    if not site_hooks:
        paths = [str(root), *site.getsitepackages()]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env | chosen, chosen


def trees(args: argparse.Namespace) -> list[Tree]:
    """The agents each variant runs, in the order each repetition runs them: this tree; each
    `--baseline-root` one; this tree with each `--ab-env` added."""
    extra = dict(item.split("=", 1) for item in args.env)

    def tree(tag: str, root: Path, more: dict[str, str]) -> Tree:
        env, chosen = agent_env(image=not args.no_image_env, site_hooks=args.site_hooks, root=root)
        return Tree(tag, root, env | extra | more, chosen | extra | more)

    out = [tree("", ROOT, {})]
    for n, root in enumerate(args.baseline_root, 1):
        out.append(tree(f"baseline{n if len(args.baseline_root) > 1 else ''}", Path(root), {}))
    for n, pairs in enumerate(args.ab_env, 1):
        more = dict(pair.split("=", 1) for pair in pairs.split(","))
        out.append(tree(f"+env{n if len(args.ab_env) > 1 else ''}", ROOT, more))
    return out


def _settings(tree: Tree) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(tree.chosen.items())) or "none"


async def main(args: argparse.Namespace) -> None:
    started = time.monotonic()
    agents = trees(args)
    for tree in agents:
        name = f"agent {tree.tag}" if tree.tag else "agent"
        print(
            f"{name} from {tree.root}, environment (Dockerfile, --env, --ab-env): {_settings(tree)}"
        )
    print(
        f"agent interpreter: {' '.join(PYTHON)}" + ("" if args.site_hooks else " (no site hooks)")
    )
    for tree in agents:
        byte_compile(tree.root)
    this = agents[0]
    bare = p3_imports.breakdown(PYTHON, ["otelgpu.cli"], ROOT, this.env)[-1][2]
    variants = _variants(args)
    runs: dict[tuple[str, str], list[Result]] = {}
    with tempfile.TemporaryDirectory(prefix="p3-", dir="/tmp") as tmp_name:
        tmp = Path(tmp_name)
        with containerd_daemon(tmp / "ctd") as containerd, rotel_blackhole(tmp / "rotel") as otlp:
            try:
                # Every variant's pods are the small node's (the 10k one shares its GPUs more).
                records = variants.get("small", Node()).write_cri_records(containerd.socket)
                print(
                    f"peers: containerd with {records} CRI records, test kubelet, rotel at {otlp}"
                )
                peers = {"tmp": tmp, "containerd": containerd.socket, "otlp": otlp}
                for label, node in variants.items():
                    down = label == DOWN
                    if args.census:  # a run of its own: tracemalloc costs RSS
                        result = await run_agent(
                            f"{label} census", node, args, peers, this, census=True, down=down
                        )
                        print(report(result))
                    for rep in range(args.repeat):
                        for tree in agents:
                            name = " ".join(filter(None, (label, tree.tag, _nth(rep, args))))
                            result = await run_agent(name, node, args, peers, tree, down=down)
                            runs.setdefault((label, tree.tag), []).append(result)
                            print(report(result))
                            print_map(result)
                # Everything is printed before the peers stop: stopping 1000 containers takes
                # minutes, and a run cut short there must not lose its figures.
                summarize(args, agents, runs, bare, started)
            finally:
                await asyncio.to_thread(stop_tasks, containerd.socket)


def byte_compile(root: Path) -> None:
    """Writes the bytecode of `root`'s otelgpu (its `__pycache__`, ignored by git), as the
    image's install does: the agent, which writes none (the image sets
    PYTHONDONTWRITEBYTECODE), then loads its modules as deployed instead of compiling them
    at every start (0.4 MiB of RSS apart)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "otelgpu")], check=True)


def _nth(rep: int, args: argparse.Namespace) -> str:
    return f"#{rep + 1}" if args.repeat > 1 else ""


def stop_tasks(socket: Path) -> None:
    """Stops every task of the bench's containerd, several at a time (the daemon's own stop
    does it one by one: minutes for a node's 1000)."""
    with ThreadPoolExecutor(4) as pool:
        ids = list(task_states(socket, "k8s.io"))
        list(pool.map(lambda cid: stop_task(socket, cid, "k8s.io"), ids))


def medians(results: list[Result]) -> tuple[float, float, float]:
    """(min, median, max) of the runs' median RSS."""
    values = [r.median for r in results]
    return min(values), statistics.median(values), max(values)


def summarize(
    args: argparse.Namespace,
    agents: list[Tree],
    runs: dict[tuple[str, str], list[Result]],
    bare: float,
    started: float,
) -> None:
    """Every figure, the P3 line last."""
    if args.repeat > 1 or len(agents) > 1:
        print(f"median RSS of each run, over {args.repeat} runs per agent (min / median / max):")
        for (label, tag), each in runs.items():
            low, mid, high = medians(each)
            name = " ".join(filter(None, (label, tag)))
            print(f"  {name:<24} {low / MIB:6.1f} {mid / MIB:6.1f} {high / MIB:6.1f} MiB")
    results = {label: runs[(label, "")] for label, tag in runs if not tag}
    first = (results.get("small") or next(iter(results.values())))[0]
    this = agents[0]
    rows = p3_imports.breakdown(PYTHON, first.modules, ROOT, this.env)
    print(f"bare `python -c 'import otelgpu.cli'`: {bare / MIB:.1f} MiB")
    p3_imports.print_breakdown(first.label, len(first.modules), first.median, rows)
    if args.census:
        p3_imports.print_census(p3_imports.census(PYTHON, first.roots, ROOT, this.env))
    print(f"elapsed {time.monotonic() - started:.0f} s", flush=True)
    imports = rows[-1][2]
    small = medians(results["small"])[1] if "small" in results else 0.0
    if args.smoke:
        print(
            f"P3 smoke: {first.series} series, RSS median {small / MIB:.1f} MiB; "
            f"interpreter + the agent's imports alone {imports / MIB:.1f} MiB (no targets)"
        )
        return
    if DOWN in results:
        full = results[DOWN][0]
        print(
            f"R4 OTLP endpoint down, sending queue full (default size), {full.series} series: "
            f"RSS median {medians(results[DOWN])[1] / MIB:.1f} MiB, max "
            f"{max(full.rss) / MIB:.1f} MiB (target <= {DOWN_TARGET // MIB}: "
            f"{_verdict(medians(results[DOWN])[1] <= DOWN_TARGET)}); "
            f"queue gauge {full.queue:.0f}, {full.otlp_failed:.0f} points dropped"
        )
    if "10k" not in results:
        if "small" in results:
            print(f"P3 small node only: {small / MIB:.1f} MiB ({first.series} series)")
        return
    second = results["10k"][0]
    large = medians(results["10k"])[1]
    if second.series < 10_000:
        print(f"warning: the 10k variant served only {second.series} series (raise --procs)")
    ok_small, ok_large = small <= SMALL_TARGET, large <= LARGE_TARGET
    print(
        f"P3 steady-state RSS (median), scraped as Prometheus 3: 8 GPUs/2 MIG/500 pods, both "
        f"exporters {small / MIB:.1f} MiB ({first.series} series; target <= "
        f"{SMALL_TARGET // MIB}: {_verdict(ok_small)}); {second.series} series "
        f"{large / MIB:.1f} MiB (target <= {LARGE_TARGET // MIB}: {_verdict(ok_large)}); "
        f"interpreter + the agent's imports alone {imports / MIB:.1f} MiB"
    )


DOWN = "7k OTLP down"


def _variants(args: argparse.Namespace) -> dict[str, Node]:
    """The runs asked for, by label, in order."""
    if args.smoke:
        return {"small": Node(gpus=2, mig_gpus=1, mig_per_gpu=2, procs=1, pods=10)}
    variants: dict[str, Node] = {}
    if not args.down_only:
        variants["small"] = Node()
        if not args.small_only:
            variants["10k"] = Node(sharers=args.sharers, procs=args.procs)
    if args.otlp_down or args.down_only:
        variants[DOWN] = Node(sharers=args.sharers, procs=args.down_procs)
    return variants


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warmup", type=float, default=10, help="seconds before sampling")
    parser.add_argument("--seconds", type=float, default=30, help="seconds of sampling")
    parser.add_argument(
        "--sharers", type=int, default=60, help="pods sharing each whole GPU (10k variant)"
    )
    parser.add_argument("--procs", type=int, default=300, help="processes per device (10k variant)")
    parser.add_argument(
        "--no-image-env",
        action="store_true",
        help="run without the environment the Dockerfile sets (MALLOC_*, ...)",
    )
    parser.add_argument(
        "--site-hooks",
        action="store_true",
        help="start the agent with `site` (this machine's .pth hooks too; the image has none)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one more variable in the agent's environment (allocator experiments); repeatable",
    )
    parser.add_argument("--small-only", action="store_true", help="skip the 10k variant")
    parser.add_argument(
        "--otlp-down",
        action="store_true",
        help="also run ~7k series with the OTLP endpoint down and the sending queue full",
    )
    parser.add_argument(
        "--down-only", action="store_true", help="only the --otlp-down run (no P3 line)"
    )
    parser.add_argument(
        "--down-procs", type=int, default=190, help="processes per device (--otlp-down run)"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each agent on each node (same peers)"
    )
    parser.add_argument(
        "--baseline-root",
        action="append",
        default=[],
        metavar="DIR",
        help="also run the agent of another source tree (its otelgpu and its Dockerfile's "
        "environment), alternating with this one's, on the same peers (repeatable)",
    )
    parser.add_argument(
        "--ab-env",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="also run this tree's agent with these variables added, alternating (repeatable: "
        "one variant each)",
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny node, 1+2 s, no targets")
    parser.add_argument(
        "--census",
        action="store_true",
        help="trace allocations (tracemalloc) and print who allocated and who holds the data "
        "(bench/p3_census.py); the RSS figures of such a run include tracemalloc's own cost",
    )
    args = parser.parse_args()
    if args.site_hooks:
        PYTHON[:] = [sys.executable]
    if args.smoke:
        args.warmup, args.seconds = 1, 2
    return args


if __name__ == "__main__":
    asyncio.run(main(_args()))
