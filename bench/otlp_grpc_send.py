"""The OTLP gRPC send, like for like: otelgpu.rpc (unary call on h2) vs grpcio's channel.

The agent sends each batch as `MetricsService/Export` (otelgpu/exporters/otlp/grpc_client.py). It
used to do so with grpcio; it now uses otelgpu.rpc, which saves ~10 MiB of resident code and
threads (P3) but frames HTTP/2 in Python. This benchmark prices that: the same request bytes
(the P2 pipeline's real request at 400 and 10k points, and a 100-byte "tiny" one, the size of
the kubelet's and containerd's requests), sent to the same server (a grpcio server
in another process that answers every Export with an empty response), with gzip as the exporter
sends by default and without, in rounds that alternate the two clients. CPU is this process's
`time.process_time()` per export (every thread: grpcio's own included); wall time per export is
printed too.

    python bench/otlp_grpc_send.py [--sizes tiny,400,10k] [--rounds 5] [--sends 20]
    python bench/otlp_grpc_send.py --smoke      # tiny and quick: proves the benchmark runs

grpcio is in the test extra (the tests' servers use it), not in the agent's dependencies.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio

from bench.node_fixture import Node
from bench.p2_cycle_cpu import SIZES, Pipeline
from otelgpu.rpc import Address, Channel
from otelgpu.telemetry import SelfTelemetry

METHOD = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
SERVER = """
import asyncio, sys, grpc, grpc.aio
async def export(request, context):
    return b""
async def main():
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 256 << 20)])
    handler = grpc.unary_unary_rpc_method_handler(export)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.metrics.v1.MetricsService", {"Export": handler}),))
    server.add_insecure_port(sys.argv[1])
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()
asyncio.run(main())
"""

Send = Callable[[bytes], Awaitable[object]]


async def request_bytes(node: Node) -> bytes:
    """The P2 pipeline's OTLP request for `node`, as the otlp exporter would send it."""
    with tempfile.TemporaryDirectory(prefix="otlp-send-proc-") as proc_dir:
        pipe = Pipeline(node, node.write_host_proc(Path(proc_dir)), SelfTelemetry())
        await pipe.start()
        try:
            await pipe.cycle()
            _, otlp = await pipe.cycle()
            return otlp
        finally:
            await pipe.shutdown()


async def grpcio_client(socket: str, gzip: bool) -> tuple[Send, Callable[[], Awaitable[None]]]:
    compression = grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression
    channel = grpc.aio.insecure_channel(f"unix://{socket}", compression=compression)
    call = channel.unary_unary(METHOD)

    async def send(request: bytes) -> object:
        return await call(request, timeout=30)

    return send, channel.close


async def rpc_client(socket: str, gzip: bool) -> tuple[Send, Callable[[], Awaitable[None]]]:
    channel = Channel(Address(path=socket), compress=gzip)

    async def send(request: bytes) -> object:
        return await channel.unary(METHOD, request, timeout=30)

    return send, channel.close


async def per_send(send: Send, request: bytes, sends: int) -> tuple[float, float]:
    """CPU and wall milliseconds per send (after one warm-up send)."""
    await send(request)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(sends):
        await send(request)
    return (
        (time.process_time() - cpu) * 1000 / sends,
        (time.perf_counter() - wall) * 1000 / sends,
    )


async def compare(socket: str, request: bytes, gzip: bool, rounds: int, sends: int) -> str:
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for _ in range(rounds):
        for client, results in ((rpc_client, ours), (grpcio_client, theirs)):
            send, close = await client(socket, gzip)
            try:
                results.append(await per_send(send, request, sends))
            finally:
                await close()
    cpu_ours = statistics.median(c for c, _ in ours)
    cpu_theirs = statistics.median(c for c, _ in theirs)
    wall_ours = statistics.median(w for _, w in ours)
    wall_theirs = statistics.median(w for _, w in theirs)
    return (
        f"{'gzip' if gzip else 'none'}: CPU per send {cpu_ours:.2f} ms vs grpcio "
        f"{cpu_theirs:.2f} ms (ratio {cpu_ours / cpu_theirs:.2f}); wall {wall_ours:.2f} vs "
        f"{wall_theirs:.2f} ms"
    )


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="otlp-send-") as folder:
        socket = os.path.join(folder, "otlp.sock")
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, f"unix://{socket}"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert server.stdout is not None
            if server.stdout.readline().strip() != "ready":
                raise RuntimeError("the grpcio server did not start")
            last = ""
            for size in args.sizes.split(","):
                # "tiny": a call such as the kubelet's or containerd's List request
                request = b"\n\x00" * 50 if size == "tiny" else await request_bytes(SIZES[size])
                print(f"{size}: request {len(request):,} bytes")
                for gzip in (True, False):
                    last = await compare(socket, request, gzip, args.rounds, args.sends)
                    print(f"  {last}")
            print(f"OTLP gRPC send, last size, {last}")
        finally:
            server.terminate()
            server.wait(10)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="tiny,400,10k")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sends", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="400 points, 1 round of 2 sends")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.rounds, args.sends = "400", 1, 2
    return args


if __name__ == "__main__":
    asyncio.run(main(_args()))
