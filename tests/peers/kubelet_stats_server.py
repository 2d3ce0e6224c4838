"""A kubelet `/stats/summary` server for tests: HTTPS on 127.0.0.1 with bearer-token auth.

No kubelet runs here (PEERS.md), so this serves the kubelet's `statsapi/v1alpha1` Summary as
a real kubelet shapes it: the node with system containers, pods with several containers,
volumes (one a PVC), network interfaces, and the gaps real summaries have (a pod scheduled
seconds ago with no stats, a container without cpu, null fields). The certificate is
self-signed for localhost/127.0.0.1 (`self_signed_cert`). Each test scripts the answer:
the summary, an HTTP status, a body that is not JSON; `stop()` makes the kubelet go away.
A real kubelet's summary of a busy node is hundreds of KB and reaches the client in many TCP
segments; `piece_size` makes this server send its body that way (each piece flushed and the
loop yielded to before the next), chunked or with a Content-Length.
"""

from __future__ import annotations

import asyncio
import copy
import json
import ssl
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.peers.prometheus import self_signed_cert

NODE = "gpu-node-1"
TOKEN = "test-token-7f3a"  # what the server accepts; tests write it into a token file
T0 = "2026-11-20T08:00:00Z"
NOW = "2026-11-21T10:00:00.123456789Z"


def _cpu(cores: float, seconds: int) -> dict[str, Any]:
    return {
        "time": NOW,
        "usageNanoCores": int(cores * 1e9),
        "usageCoreNanoSeconds": seconds * 1_000_000_000,
    }


def _memory(working_set: int, *, rss: int | None = None) -> dict[str, Any]:
    return {
        "time": NOW,
        "availableBytes": 8 << 30,
        "usageBytes": working_set + (100 << 20),
        "workingSetBytes": working_set,
        "rssBytes": rss if rss is not None else working_set // 2,
        "pageFaults": 123_456,
        "majorPageFaults": 12,
    }


def _fs(used: int, capacity: int = 100 << 30) -> dict[str, Any]:
    return {
        "time": NOW,
        "availableBytes": capacity - used,
        "capacityBytes": capacity,
        "usedBytes": used,
        "inodesFree": 1_000_000,
        "inodes": 1_200_000,
        "inodesUsed": 200_000,
    }


def _network(rx: int, tx: int) -> dict[str, Any]:
    eth0 = {"name": "eth0", "rxBytes": rx, "rxErrors": 0, "txBytes": tx, "txErrors": 1}
    # The kubelet repeats the default interface's counters at the top level.
    return {"time": NOW, **eth0, "interfaces": [eth0, {**eth0, "name": "net1", "rxErrors": 2}]}


def sample_summary() -> dict[str, Any]:
    """A summary shaped like a real kubelet's (v1.30), with the usual gaps."""
    trainer = {
        "podRef": {"name": "trainer-0", "namespace": "ml", "uid": "6f1e2d3c-0000-4a5b-8c7d-1"},
        "startTime": T0,
        "containers": [
            {
                "name": "trainer",
                "startTime": T0,
                "cpu": _cpu(3.5, 7200),
                "memory": _memory(6 << 30),
                "rootfs": _fs(2 << 20),
                "logs": _fs(4 << 20),
            },
            {  # a sidecar the kubelet has no cpu sample for yet, and null rss
                "name": "log-shipper",
                "startTime": T0,
                "memory": {**_memory(64 << 20), "rssBytes": None},
            },
        ],
        "cpu": _cpu(3.6, 7300),
        "memory": _memory((6 << 30) + (64 << 20)),
        "network": _network(10_000_000, 2_000_000),
        "volume": [
            {
                **_fs(1 << 30, 10 << 30),
                "name": "data",
                "pvcRef": {"name": "data-trainer-0", "namespace": "ml"},
            },
            {**_fs(4096, 1 << 20), "name": "kube-api-access-x7k2p"},
        ],
        "ephemeral-storage": _fs(6 << 20),
    }
    return {
        "node": {
            "nodeName": NODE,
            "systemContainers": [
                {
                    "name": "kubelet",
                    "startTime": T0,
                    "cpu": _cpu(0.05, 900),
                    "memory": _memory(90 << 20),
                },
                {
                    "name": "runtime",
                    "startTime": T0,
                    "cpu": _cpu(0.02, 300),
                    "memory": _memory(60 << 20),
                },
            ],
            "startTime": T0,
            "cpu": _cpu(4.25, 90_000),
            "memory": _memory(20 << 30),
            "network": _network(500_000_000, 300_000_000),
            "fs": _fs(40 << 30, 200 << 30),
            "runtime": {"imageFs": _fs(30 << 30, 200 << 30)},
            "rlimit": {"time": NOW, "maxpid": 4194304, "curproc": 812},
        },
        "pods": [
            trainer,
            {  # scheduled a moment ago: identity only, no stats yet
                "podRef": {"name": "pending-1", "namespace": "ml", "uid": "9a8b7c6d-0000-1"},
                "startTime": NOW,
                "containers": [{"name": "main", "startTime": NOW}],
            },
            {"podRef": {"namespace": "ml"}, "cpu": _cpu(1, 1)},  # no name: skipped, counted
        ],
    }


def busy_node_summary(pods: int, *, namespace: str = "work") -> dict[str, Any]:
    """A summary of a node running `pods` pods, each with two containers, two volumes (one a
    claim) and its network, as a kubelet reports a full node (110 pods: ~300 KB)."""
    summary = sample_summary()
    template = summary["pods"][0]
    summary["pods"] = []
    for n in range(pods):
        pod = copy.deepcopy(template)
        name = f"worker-{n}"
        pod["podRef"] = {"name": name, "namespace": namespace, "uid": f"uid-{name}-0001"}
        pod["containers"][1]["cpu"] = _cpu(0.01, n)
        pod["volume"][0]["pvcRef"] = {"name": f"data-{name}", "namespace": namespace}
        summary["pods"].append(pod)
    return summary


class KubeletStatsServer:
    """`await start()`, then `url`; set `summary`, `status` or `body` to script answers."""

    def __init__(self, directory: Path, *, tls: bool = True, token: str | None = TOKEN) -> None:
        self.directory = directory
        self.tls = tls
        self.token = token
        self.summary: dict[str, Any] = sample_summary()
        self.status = 200
        self.body: bytes | None = None  # raw bytes served instead of the summary
        self.delay = 0.0  # seconds to wait before answering (a kubelet under load)
        self.piece_size = 0  # > 0: the body is sent in pieces of this many bytes
        self.chunked = True  # with piece_size: chunked transfer encoding, else Content-Length
        self.error_text = "kubelet says no"  # the body of a non-200 answer
        self.content_encoding = ""  # e.g. "gzip": `body` is sent as it is, so encoded
        self.requests = 0
        self.refused = 0
        self.port = 0
        self.ca_file: Path | None = None
        self._key_file = directory / "key.pem"
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The endpoint to give the receiver."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listens on a free 127.0.0.1 port (the same one again after a `stop()`)."""
        app = web.Application()
        app.router.add_get("/stats/summary", self._summary)
        # A short shutdown grace: a request held by `delay` must not hold up `stop()`.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        context = None
        if self.tls:
            if self.ca_file is None:  # one certificate for the server's whole life
                self.ca_file, self._key_file = self_signed_cert(self.directory)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.ca_file, self._key_file)
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=context)
        await site.start()
        if not self.port:
            self.port = int(self._runner.addresses[0][1])

    async def _summary(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if (
            self.token is not None
            and request.headers.get("Authorization") != f"Bearer {self.token}"
        ):
            self.refused += 1
            return web.Response(status=401, text="Unauthorized")
        if self.status != 200:
            return web.Response(status=self.status, text=self.error_text)
        body = self.body if self.body is not None else json.dumps(self.summary).encode()
        if self.content_encoding:
            headers = {"Content-Encoding": self.content_encoding}
            return web.Response(body=body, content_type="application/json", headers=headers)
        if self.piece_size <= 0:
            return web.Response(body=body, content_type="application/json")
        return await self._in_pieces(request, body)

    async def _in_pieces(self, request: web.Request, body: bytes) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        if self.chunked:
            response.enable_chunked_encoding()
        else:
            response.content_length = len(body)
        await response.prepare(request)
        for start in range(0, len(body), self.piece_size):
            await response.write(body[start : start + self.piece_size])
            await asyncio.sleep(0)  # let the client read what arrived so far
        await response.write_eof()
        return response

    async def rotate_certificate(self) -> None:
        """The kubelet comes back with a new self-signed serving certificate (its own CA), as
        after a certificate or cluster CA rotation; `ca_file` then names the new one."""
        await self.stop()
        self.directory = self.directory / "rotated"
        self.directory.mkdir()
        self.ca_file = None
        await self.start()

    async def stop(self) -> None:
        """The kubelet goes away; a later `start()` listens on the same port again."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
