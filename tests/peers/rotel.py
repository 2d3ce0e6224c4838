"""The real rotel OTLP receiver for tests, and a parser for what it prints.

rotel (PyPI `rotel`, a Rust OpenTelemetry collector shipped as a wheel) runs with the
blackhole exporter and `--debug-log metrics --debug-log-verbosity detailed`: it prints every
resource, scope, metric, attribute and value it received, in the Collector's debug format.
Its stdout goes to a file, read back and parsed on demand. It is started on 127.0.0.1 ports
and stopped by its pid; a missing binary fails the test with the install hint.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.peers.ports import free_port

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TYPED = re.compile(r"^(\w+)\((.*)\)$")


def rotel_binary() -> Path:
    """The `rotel-agent` binary inside the installed `rotel` package."""
    try:
        import rotel
    except ImportError:
        raise RuntimeError(
            "rotel is not installed: the OTLP tests need the real receiver (pip install rotel)"
        ) from None
    path = Path(rotel.__file__).parent / "rotel-agent"
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"rotel is installed but {path} is missing or not executable")
    return path


def typed(text: str) -> object:
    """`Str(x)` → "x", `Int(3)` → 3, `Double(1.5)` → 1.5, `Bool(true)` → True."""
    match = _TYPED.match(text)
    if not match:
        return text
    kind, raw = match.groups()
    converters: dict[str, Callable[[str], object]] = {
        "Str": str,
        "Int": int,
        "Double": float,
        "Bool": lambda v: v == "true",
    }
    return converters.get(kind, str)(raw)


@dataclass
class Point:
    """One NumberDataPoint as rotel printed it."""

    attributes: dict[str, object] = field(default_factory=dict)
    start_time_unix_nano: int = 0
    time_unix_nano: int = 0
    value: float = 0.0
    raw_value: str = ""


@dataclass
class MetricOut:
    """One metric as rotel printed it (descriptor fields verbatim)."""

    name: str = ""
    description: str = ""
    unit: str = ""
    data_type: str = ""
    monotonic: bool | None = None
    temporality: str = ""
    points: list[Point] = field(default_factory=list)


@dataclass
class ResourceOut:
    """One ResourceMetrics with its (single) scope."""

    attributes: dict[str, object] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    metrics: list[MetricOut] = field(default_factory=list)


def parse(text: str) -> list[ResourceOut]:
    """Every resource rotel printed, in order."""
    resources: list[ResourceOut] = []
    section = ""
    for line in _ANSI.sub("", text).splitlines():
        if line.startswith("ResourceMetrics #"):
            resources.append(ResourceOut())
            section = "resource"
        elif not resources:
            continue
        elif line.startswith("     -> "):
            _property(resources[-1], section, line[len("     -> ") :])
        else:
            section = _top_level(resources[-1], line) or section
    return resources


def _top_level(rm: ResourceOut, line: str) -> str:
    """Applies a line outside a `->` list; returns the section it opens, if any."""
    key, _, value = line.partition(": ")
    if line.startswith("InstrumentationScope "):
        parts = line.split(" ", 2)
        rm.scope_name = parts[1] if len(parts) > 1 else ""
        rm.scope_version = parts[2].strip() if len(parts) > 2 else ""
    elif line.startswith("Metric #"):
        rm.metrics.append(MetricOut())
    elif line.startswith("Descriptor:"):
        return "descriptor"
    elif line.startswith("NumberDataPoints #"):
        rm.metrics[-1].points.append(Point())
        return "point"
    elif key == "StartTimestamp":
        rm.metrics[-1].points[-1].start_time_unix_nano = int(value)
    elif key == "Timestamp":
        rm.metrics[-1].points[-1].time_unix_nano = int(value)
    elif key == "Value":
        point = rm.metrics[-1].points[-1]
        point.raw_value, point.value = value, float(value)
    return ""


def _property(rm: ResourceOut, section: str, text: str) -> None:
    key, _, value = text.partition(": ")
    if section == "resource":
        rm.attributes[key] = typed(value)
    elif section == "point":
        rm.metrics[-1].points[-1].attributes[key] = typed(value)
    elif section == "descriptor":
        metric = rm.metrics[-1]
        if key == "IsMonotonic":
            metric.monotonic = value == "true"
        else:
            attr = {"DataType": "data_type", "AggregationTemporality": "temporality"}
            setattr(metric, attr.get(key, key.lower()), value)


class Rotel:
    """A running rotel receiver on loopback ports (started by `rotel()`)."""

    def __init__(self, workdir: Path, grpc_port: int, http_port: int) -> None:
        self.workdir = workdir
        self.grpc_port = grpc_port
        self.http_port = http_port
        self.proc: subprocess.Popen[bytes] | None = None
        self._runs = 0

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> None:
        """Starts rotel (again, on the same ports) and waits until both ports accept."""
        self._runs += 1
        out = self.workdir / f"stdout.{self._runs}"
        args = [
            str(rotel_binary()),
            "start",
            "--exporter=blackhole",
            "--debug-log=metrics",
            "--debug-log-verbosity=detailed",
            f"--otlp-grpc-endpoint=127.0.0.1:{self.grpc_port}",
            f"--otlp-http-endpoint=127.0.0.1:{self.http_port}",
            f"--pid-file={self.workdir / 'rotel.pid'}",
            f"--log-file={self.workdir / 'rotel.log'}",
        ]
        with out.open("wb") as stdout:
            self.proc = subprocess.Popen(args, stdout=stdout, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while not (_listening(self.grpc_port) and _listening(self.http_port)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"rotel did not start:\n{out.read_text(errors='replace')}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stops rotel by its pid (SIGTERM, then SIGKILL) and waits for it to exit."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def text(self) -> str:
        """Everything rotel printed, over all of its runs."""
        files = sorted(self.workdir.glob("stdout.*"), key=lambda p: int(p.suffix[1:]))
        return "".join(p.read_text(errors="replace") for p in files)

    def resources(self) -> list[ResourceOut]:
        """Every resource received so far."""
        return parse(self.text())

    async def restart(self) -> None:
        """`start` off the event loop, so the exporter under test keeps running meanwhile."""
        await asyncio.to_thread(self.start)

    async def wait_for(
        self, done: Callable[[list[ResourceOut]], bool], timeout: float = 15.0
    ) -> list[ResourceOut]:
        """Polls what rotel printed until `done` holds; raises with the output if it never does.

        Async so that the exporter under test, on the same event loop, keeps sending."""
        deadline = time.monotonic() + timeout
        while True:
            resources = self.resources()
            if done(resources):
                return resources
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"rotel never printed what was expected:\n{self.text()[-4000:]}"
                )
            await asyncio.sleep(0.05)


def _listening(port: int) -> bool:
    with contextlib.closing(socket.socket()) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def rotel(workdir: Path) -> Iterator[Rotel]:
    """A started rotel on two free loopback ports; stopped (by pid) when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    peer = Rotel(workdir, free_port(), free_port())
    peer.start()
    try:
        yield peer
    finally:
        peer.stop()
