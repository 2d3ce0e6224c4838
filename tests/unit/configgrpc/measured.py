"""The real client in a child process, its resident memory its own and watched: one warm-up
call to a sane peer, then the call under test once the peer has turned hostile. The child's
peak is read before and after that call; a child that passes the ceiling is killed, so a call
that would eat the machine fails its test instead of thrashing it."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.unit.configgrpc.hostile import HostileServer

MiB = 2**20
CEILING = 1024 * MiB  # far above any bound a test states, far below what the machine has
_WATCH = 0.02  # seconds between two looks at the child's memory

# argv: target, max_receive, the call's timeout, how many calls. Prints the peak before and
# after the calls (KiB) and the last call's outcome.
_CHILD = """
import asyncio, sys
from otelgpu.configgrpc import ChannelPolicy, Client, RpcError

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

async def main():
    client = Client(sys.argv[1], ChannelPolicy(max_receive=int(sys.argv[2]), proxy=False))
    await client.unary("/test.Echo/Warm", b"", timeout=30)
    before = peak()
    for _ in range(int(sys.argv[4])):
        try:
            await client.unary("/test.Echo/Call", b"", timeout=float(sys.argv[3]))
            outcome = "OK"
        except RpcError as exc:
            outcome = exc.code.name
    print(before, peak(), outcome, flush=True)
    await client.close()

asyncio.run(main())
"""

# The containerd adapter instead: argv: socket, the call's timeout. Lists once to warm up,
# then once more; the outcome is how many containers the second listing read, or its error.
_CONTAINERD_CHILD = """
import asyncio, sys
from otelgpu.processors.container_env.containerd import ContainerdRuntime
from otelgpu.processors.container_env.runtime import RuntimeUnavailable

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

async def main():
    runtime = ContainerdRuntime(sys.argv[1], "k8s.io", float(sys.argv[2]))
    await runtime.list_containers()
    before = peak()
    try:
        outcome = str(len(await runtime.list_containers()))
    except RuntimeUnavailable as exc:
        outcome = str(exc).split(": ", 1)[-1].split()[0]  # the status code's name
    print(before, peak(), outcome, flush=True)
    await runtime.close()

asyncio.run(main())
"""


@dataclass(frozen=True)
class Measured:
    outcome: str  # OK, a status code's name, or KILLED when the child passed the ceiling
    before: int  # the child's peak resident memory before the call, bytes
    after: int  # ... and after it (at the ceiling when killed)

    @property
    def growth(self) -> int:
        return self.after - self.before


async def measured_call(
    server: HostileServer, mode: str, *, max_receive: int, timeout: float, calls: int = 1
) -> Measured:
    """The outcome and memory of `calls` calls one after another, made once `server` (sane
    for the warm-up) is in `mode`."""
    argv = (_CHILD, server.target, str(max_receive), str(timeout), str(calls))
    return await _measured(server, mode, argv, calls * timeout)


async def measured_containerd_list(server: HostileServer, mode: str, *, timeout: float) -> Measured:
    """The outcome and memory of the containerd adapter's listing once `server` (a sane
    containerd for the warm-up) is in `mode`; the outcome is the number of containers read."""
    return await _measured(
        server, mode, (_CONTAINERD_CHILD, str(server.socket), str(timeout)), timeout
    )


async def _measured(
    server: HostileServer, mode: str, argv: tuple[str, ...], timeout: float
) -> Measured:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", *argv, stdout=asyncio.subprocess.PIPE
    )
    try:
        await server.called.wait()  # the warm-up call: every later call meets `mode`
        server.mode = mode
        # The child's own deadlines end it; past them by a minute it hangs, and is killed.
        async with asyncio.timeout(timeout + 60):
            killed_at = await _watch(child)
        out = await child.stdout.read() if child.stdout else b""
    finally:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()
    if killed_at:
        return Measured("KILLED", 0, killed_at)
    before, after, outcome = out.decode().split()
    return Measured(outcome, int(before) * 1024, int(after) * 1024)


async def _watch(child: asyncio.subprocess.Process) -> int:
    """0 when the child ends by itself; its resident memory when it passed the ceiling and
    was killed."""
    status = Path(f"/proc/{child.pid}/status")
    while True:
        try:
            await asyncio.wait_for(asyncio.shield(child.wait()), _WATCH)
            return 0
        except TimeoutError:
            pass
        resident = _resident(status)
        if resident > CEILING:
            child.kill()
            return resident


def _resident(status: Path) -> int:
    with contextlib.suppress(OSError):
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
