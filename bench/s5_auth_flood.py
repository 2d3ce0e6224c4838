"""S5: how long a scraper's first answer takes on `/metrics` with basic auth during a
200-client wrong-password flood, from a fresh address and from the flood's own address.

The `/metrics` server (`MetricsServer`, its own thread, bcrypt at `--cost`) runs in this
process; the flood runs in a child process: 200 keep-alive clients spread over 20 loopback
addresses (127.0.0.10-29), each asking again as soon as it is answered, either repeating one
wrong password (`repeat`) or guessing a new one each time (`guess`). While it runs, a scraper
with the right password asks once from a fresh address (127.0.0.2) and once from a flood
address (127.0.0.10), each on a new server-side memory of pairs (a fresh authenticator per
scenario, so its first scrape really needs a check), retrying after `Retry-After` on a 429/503
as Prometheus would on its next scrape (each try on a new connection: one that was refused
would stand behind new ones, `auth.standing`). The baseline is the same first scrape with no flood
(about one bcrypt check), measured in the same run.

    python bench/s5_auth_flood.py [--cost 10] [--rounds 3]

The last lines give each scenario's worst first answer and its ratio to the baseline
(target: a correct scrape served within 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gzip
import http.client
import multiprocessing
import statistics
import time
from multiprocessing.synchronize import Event

import bcrypt

from otelgpu.exporters.prometheus.auth import BasicAuthenticator
from otelgpu.exporters.prometheus.config import BasicAuthConfig
from otelgpu.exporters.prometheus.render import Body
from otelgpu.exporters.prometheus.server import MetricsServer

PASSWORD = "s3cret-scrape"
FLOOD_ADDRESSES = [f"127.0.0.{i}" for i in range(10, 30)]
FLOOD_CLIENTS = 200
FRESH, SHARED = "127.0.0.2", FLOOD_ADDRESSES[0]
BODY = Body(b"up 1\n", gzip.compress(b"up 1\n"), 1)


def basic(password: str) -> str:
    return "Basic " + base64.b64encode(f"prom:{password}".encode()).decode()


def flood(port: int, mode: str, running: Event, stop: Event) -> None:
    """The child process: FLOOD_CLIENTS clients asking until `stop` is set."""

    async def client(n: int) -> None:
        address = FLOOD_ADDRESSES[n % len(FLOOD_ADDRESSES)]
        sent = 0
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, local_addr=(address, 0)
                )
            except OSError:
                continue
            try:
                while not stop.is_set():
                    password = "wrong" if mode == "repeat" else f"guess-{n}-{sent}"
                    sent += 1
                    head = f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: {basic(password)}"
                    writer.write(f"{head}\r\n\r\n".encode())
                    answer = await reader.readuntil(b"\r\n\r\n")
                    length = int(answer.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                    await reader.readexactly(length)
                    running.set()
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                pass
            finally:
                writer.close()

    async def main() -> None:
        tasks = [asyncio.create_task(client(n)) for n in range(FLOOD_CLIENTS)]
        while not stop.is_set():
            await asyncio.sleep(0.05)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def first_answer(port: int, address: str) -> tuple[float, int]:
    """Seconds until a 200 for the right password from `address` (retrying a 429/503 after
    its Retry-After), and how many tries it took."""
    start = time.perf_counter()
    for tries in range(1, 60):
        conn = http.client.HTTPConnection(
            "127.0.0.1", port, timeout=60, source_address=(address, 0)
        )
        conn.request("GET", "/metrics", headers={"Authorization": basic(PASSWORD)})
        response = conn.getresponse()
        response.read()
        conn.close()
        if response.status == 200:
            return time.perf_counter() - start, tries
        if response.status not in (429, 503):
            raise RuntimeError(f"unexpected answer {response.status}")
        time.sleep(float(response.getheader("Retry-After") or 1))
    raise RuntimeError("never served")


async def scenario(hash_: str, mode: str | None, address: str) -> tuple[float, int]:
    checker = BasicAuthenticator(BasicAuthConfig(username="prom", password_hash=hash_))  # type: ignore[arg-type]
    await checker.prepare()
    server = MetricsServer(
        host="0.0.0.0", port=0, current=lambda: BODY, on_scrape=lambda *_: None,
        authenticator=checker,
    )  # fmt: skip
    await server.start()
    child = None
    stop = multiprocessing.Event()
    try:
        if mode is not None:
            running = multiprocessing.Event()
            child = multiprocessing.Process(target=flood, args=(server.port, mode, running, stop))
            child.start()
            await asyncio.to_thread(running.wait, 60)
            # the flood's addresses have been refused a place or failed by now, and every
            # place in line is taken
            await asyncio.to_thread(time.sleep, 1.0)
        return await asyncio.to_thread(first_answer, server.port, address)
    finally:
        stop.set()
        if child is not None:
            await asyncio.to_thread(child.join, 30)
        await server.stop()


async def main(args: argparse.Namespace) -> None:
    hash_ = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=args.cost)).decode()
    cases = [("no flood (baseline)", None, FRESH)] + [
        (f"{mode} flood, {where} address", mode, address)
        for mode in ("repeat", "guess")
        for where, address in (("fresh", FRESH), ("the flood's", SHARED))
    ]
    results: dict[str, list[tuple[float, int]]] = {name: [] for name, _, _ in cases}
    for _ in range(args.rounds):  # interleaved, so machine noise spreads over every case
        for name, mode, address in cases:
            results[name].append(await scenario(hash_, mode, address))
    baseline = statistics.median(t for t, _ in results[cases[0][0]])
    print(f"bcrypt cost {args.cost}; {FLOOD_CLIENTS} flood clients over "
          f"{len(FLOOD_ADDRESSES)} addresses; {args.rounds} rounds")  # fmt: skip
    for name, _, _ in cases:
        worst = max(t for t, _ in results[name])
        tries = max(n for _, n in results[name])
        print(
            f"{name:<36} first answer: worst {worst * 1000:7.0f} ms, "
            f"median {statistics.median(t for t, _ in results[name]) * 1000:7.0f} ms, "
            f"tries {tries}, worst / baseline {worst / baseline:5.1f}"
        )
    print(f"S5 target: every first answer within 1 s (baseline {baseline * 1000:.0f} ms)")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost", type=int, default=10, help="bcrypt cost of the hash")
    parser.add_argument("--rounds", type=int, default=3, help="runs of every scenario")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_args()))
