"""For P7: the agent's HTTP stack serving fixed copies of the agent's bodies from a process of
its own, so that the benchmark can scrape `/metrics` as it would be served with no GIL shared
with the pipeline (only the machine's cores).

The same `otelgpu.confighttp.listener.Listener` (httptools on its own thread and loop, the send-buffer
and slicing rules), the 0.1 ms switch interval the agent sets for itself, and the exporter's
Accept-Encoding negotiation answer each request; the bodies are files the benchmark fetched from the agent, read once.
This process's main thread only waits, as a serving process's would.

    python bench/p7_own_process.py PLAIN_FILE GZIP_FILE

prints the port it listens on, then serves until its standard input is closed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otelgpu.confighttp import listener as http_listener
from otelgpu.confighttp.listener import Listener, Request, Response
from otelgpu.exporters.prometheus.server import accepts_gzip

_TYPE = ("Content-Type", "text/plain; version=0.0.4; charset=utf-8")


def handler(plain: bytes, gzipped: bytes) -> Callable[[Request], Response]:
    """Answers any request with the gzip body where the client accepts gzip, else the plain."""

    def answer(request: Request) -> Response:
        if accepts_gzip(request.headers.get("accept-encoding", "")):
            return Response(200, gzipped, (_TYPE, ("Content-Encoding", "gzip")))
        return Response(200, plain, (_TYPE,))

    return answer


async def serve(plain: bytes, gzipped: bytes) -> None:
    listener = Listener(handler(plain, gzipped), "127.0.0.1", 0, name="p7 own process")
    await listener.start()
    try:
        print(listener.port, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the benchmark closes it
    finally:
        await listener.stop()


def main() -> None:
    plain, gzipped = (Path(name).read_bytes() for name in sys.argv[1:3])
    sys.setswitchinterval(http_listener.SWITCH_INTERVAL)  # as the agent sets it while it runs
    asyncio.run(serve(plain, gzipped))


if __name__ == "__main__":
    main()
