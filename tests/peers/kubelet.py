"""A kubelet pod-resources v1 server for tests: the real gRPC protocol on a unix socket.

No kubelet runs here (PEERS.md), so this serves `v1.PodResourcesLister` with grpc.aio from
the project's own stubs, on `<tmp>/kubelet.sock`, with answers each test scripts: pods and
their containers' device IDs and DRA claim devices (`dynamic_resources`), allocatable devices, delays, error codes (RESOURCE_EXHAUSTED,
UNAVAILABLE, ...), the kubelet's token-bucket rate limit, a missing `GetAllocatableResources`,
and the socket going away or being replaced by a new one as a kubelet restart does.
"""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from otelgpu.processors.k8s_attributes._proto import podresources_pb2 as pb
from tests.peers._proto import podresources_pb2_grpc as rpc

Devices = Mapping[str, Iterable[str]]  # resource name → device IDs


def container(
    name: str, devices: Devices | None = None, *claims: pb.DynamicResource
) -> pb.ContainerResources:
    """A container entry; `devices` maps a resource name to its device IDs; `claims` are its
    DRA resource claims."""
    return pb.ContainerResources(
        name=name,
        devices=[
            pb.ContainerDevices(resource_name=r, device_ids=list(ids))
            for r, ids in (devices or {}).items()
        ],
        cpu_ids=[2, 3],  # real answers carry more than devices; the client must ignore it
        dynamic_resources=list(claims),
    )


def claim_device(
    device: str,
    *,
    pool: str = "node-a",
    driver: str = "gpu.nvidia.com",
    cdi: Iterable[str] = (),
    share_id: str | None = None,
) -> pb.ClaimResource:
    """One allocated device of a claim, as a 1.31+ kubelet reports it (`driver=""` and
    `device=""` with `cdi` names: as 1.27-1.30 kubelets do)."""
    found = pb.ClaimResource(
        driver_name=driver,
        pool_name=pool,
        device_name=device,
        cdi_devices=[pb.CDIDevice(name=n) for n in cdi],
    )
    if share_id is not None:
        found.share_id = share_id
    return found


def claim(name: str, namespace: str, *devices: pb.ClaimResource) -> pb.DynamicResource:
    """A DRA resource claim of a container, with the devices allocated to it."""
    return pb.DynamicResource(
        claim_name=name, claim_namespace=namespace, claim_resources=list(devices)
    )


def pod(namespace: str, name: str, *containers: pb.ContainerResources) -> pb.PodResources:
    """A pod entry with its containers, in the order the kubelet lists them."""
    return pb.PodResources(namespace=namespace, name=name, containers=list(containers))


def devices(resources: Devices) -> list[pb.ContainerDevices]:
    """`GetAllocatableResources` devices."""
    return [pb.ContainerDevices(resource_name=r, device_ids=list(i)) for r, i in resources.items()]


class _TokenBucket:
    """The kubelet's limiter on this API (100 QPS, burst 10 by default)."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, burst
        self.tokens, self.stamp = float(burst), time.monotonic()

    def allow(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class FakeKubelet(rpc.PodResourcesListerServicer):  # type: ignore[misc]
    """The scripted server. Mutate the public fields between calls to change its answers."""

    def __init__(self, directory: Path | None = None) -> None:
        # A short path: unix socket paths are limited to 107 bytes.
        self.dir = directory or Path(tempfile.mkdtemp(prefix="kubelet-", dir="/tmp"))
        self.socket = self.dir / "kubelet.sock"
        self.pods: list[pb.PodResources] = []
        self.allocatable: list[pb.ContainerDevices] = []
        self.allocatable_served = True
        self.delay = 0.0
        self.errors: collections.deque[tuple[grpc.StatusCode, str]] = collections.deque()
        self.rate_limit: _TokenBucket | None = None
        self.calls: list[str] = []
        self._server: Any = None

    # --- scripting ------------------------------------------------------------------------

    def set_pods(self, *pods: pb.PodResources) -> None:
        self.pods = list(pods)

    def set_allocatable(self, resources: Devices) -> None:
        self.allocatable = devices(resources)

    def fail_next(self, code: grpc.StatusCode, details: str = "", times: int = 1) -> None:
        self.errors.extend([(code, details)] * times)

    def limit_rate(self, qps: float = 100.0, burst: int = 10) -> None:
        self.rate_limit = _TokenBucket(qps, burst)

    def count(self, method: str) -> int:
        return self.calls.count(method)

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        server = grpc.aio.server()
        rpc.add_PodResourcesListerServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server

    async def stop(self, *, remove_socket: bool = True) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)
        if remove_socket:
            self.remove_socket()

    def remove_socket(self) -> None:
        """Deletes the socket file (the server, if running, keeps its open connections)."""
        if self.socket.exists() or self.socket.is_symlink():
            os.unlink(self.socket)

    async def restart(self) -> None:
        """What a kubelet restart looks like from outside: the socket goes, a new one comes."""
        await self.stop(remove_socket=True)
        await self.start()

    async def close(self) -> None:
        await self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- the service ----------------------------------------------------------------------

    async def List(self, request: Any, context: Any) -> pb.ListPodResourcesResponse:
        await self._answer("List", context)
        return pb.ListPodResourcesResponse(pod_resources=self.pods)

    async def GetAllocatableResources(
        self, request: Any, context: Any
    ) -> pb.AllocatableResourcesResponse:
        if not self.allocatable_served:
            self.calls.append("GetAllocatableResources")
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "method not implemented")
        await self._answer("GetAllocatableResources", context)
        return pb.AllocatableResourcesResponse(devices=self.allocatable, cpu_ids=[0, 1, 2, 3])

    async def Get(self, request: Any, context: Any) -> pb.GetPodResourcesResponse:
        await self._answer("Get", context)
        for p in self.pods:
            if p.name == request.pod_name and p.namespace == request.pod_namespace:
                return pb.GetPodResourcesResponse(pod_resources=p)
        await context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} not found")
        raise AssertionError("unreachable")

    async def _answer(self, method: str, context: Any) -> None:
        self.calls.append(method)
        if self.rate_limit is not None and not self.rate_limit.allow():
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.errors:
            code, details = self.errors.popleft()
            await context.abort(code, details)


@pytest.fixture
async def kubelet() -> AsyncIterator[FakeKubelet]:
    """A started `FakeKubelet` with no pods yet, closed after the test (import it where used)."""
    server = FakeKubelet()
    await server.start()
    yield server
    await server.close()
