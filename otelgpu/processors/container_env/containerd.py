"""containerd adapter: the containers and tasks APIs over gRPC on containerd's unix socket,
read-only."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from otelgpu.configgrpc import ChannelPolicy, Client, RpcError
from otelgpu.processors.container_env.runtime import (
    ContainerRef,
    ContainerSpec,
    RuntimeUnavailable,
    decode_oci_spec,
)

CONTAINERS = "containerd.services.containers.v1.Containers"
TASKS = "containerd.services.tasks.v1.Tasks"
# The only methods this client can call: it is built from this list, not from the
# generated stubs, so a create, update, kill or delete cannot be sent by mistake.
READ_METHODS = frozenset({f"{CONTAINERS}/ListStream", f"{CONTAINERS}/Get", f"{TASKS}/List"})
NAMESPACE_HEADER = "containerd-namespace"
OCI_SPEC_TYPE = "types.containerd.io/opencontainers/runtime-spec/1/Spec"

# Task states (containerd.v1.types.Status) of a live container. The CRI plugin keeps a
# task for every running container and for a ready sandbox's pause container; an exited
# container's task is STOPPED or gone. A paused container is still alive (docker's
# `State.Running` is true while paused too); PAUSING is on its way there.
_RUNNING, _PAUSED, _PAUSING = 2, 4, 5
LIVE_TASK_STATES = frozenset({_RUNNING, _PAUSED, _PAUSING})

# Containers are listed with ListStream, one message per container record (its full OCI spec),
# never with List, whose one answer holds every record: grpcio holds about 16 bytes per byte of a
# message while it arrives in tiny frames, so the receive limit is what bounds a hostile
# containerd's cost, and so it bounds one record, not the node. A record is a few KiB to a few
# tens of KiB (a spec with thousands of env entries or mounts stays under 1 MiB); 4 MiB holds
# every real one, and a record over it fails the listing (RESOURCE_EXHAUSTED). It also bounds the
# Tasks/List answer (no streaming form): a task is a few hundred bytes (its IDs and stdio
# paths), so some 7,000 running containers.
MAX_MESSAGE = 4 * 2**20
# Containers read per listing. The CRI plugin keeps a record per container and sandbox, exited
# ones included until they are collected: a node at Kubernetes' 110 pods holds a few hundred, a
# dense one a few thousand. Beyond this the listing stops, keeps what it read (the rest get no
# labels), and counts it in `listings_cut`, logged once.
MAX_CONTAINERS = 16_384
# Every call only reads, so the refresh loop may ask again after any failure.
_POLICY = ChannelPolicy(max_receive=MAX_MESSAGE, proxy=False)
_log = logging.getLogger("otelgpu.processors.container_env")


class ContainerdRuntime:
    """`ContainerRuntime` over containerd's containers and tasks services in one namespace
    (`k8s.io`): every container record, running when its task is alive.

    The connection is opened on first use and dropped after any failure, so a containerd that
    was restarted (a new socket at the same path) is reached on the next refresh.
    """

    def __init__(self, socket: str, namespace: str, timeout: float) -> None:
        self._socket = socket
        self._metadata = ((NAMESPACE_HEADER, namespace),)
        self._timeout = timeout
        self._channel: Client | None = None
        self.listings_cut = 0  # listings that stopped at MAX_CONTAINERS

    @property
    def name(self) -> str:
        return "containerd"

    @property
    def endpoint(self) -> str:
        return self._socket

    async def list_containers(self) -> Sequence[ContainerRef]:
        containers = await self._containers()
        # Tasks after records: a container that starts in between reads as not running
        # until the next refresh, one that ends in between reads as ended. Never the reverse.
        tasks = await self._list(TASKS)
        live = {t.container_id or t.id for t in tasks.tasks if t.status in LIVE_TASK_STATES}
        return [_ref(c, running=c.id in live) for c in containers]

    async def container_spec(self, ref: ContainerRef, *, env: bool) -> ContainerSpec | None:
        if not ref.raw_spec:
            return ContainerSpec(valid=False)
        return decode_oci_spec(ref.raw_spec)

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    async def _containers(self) -> list[Any]:
        """The container records of Containers/ListStream, at most `MAX_CONTAINERS`."""
        pb = _messages("containers_pb2")
        request = pb.ListContainersRequest().SerializeToString()
        records: list[Any] = []
        async with contextlib.aclosing(self._stream(CONTAINERS, "ListStream", request)) as stream:
            async for raw in stream:
                if len(records) == MAX_CONTAINERS:
                    self._cut()
                    break  # the call is cancelled, the connection kept
                try:
                    records.append(pb.ListContainerMessage.FromString(raw).container)
                except Exception as exc:  # protobuf's DecodeError
                    raise RuntimeUnavailable(f"Containers/ListStream: undecodable ({exc})") from exc
        return records

    def _cut(self) -> None:
        self.listings_cut += 1
        if self.listings_cut == 1:
            _log.warning(
                "containerd at %s lists more than %d containers: each listing keeps the first "
                "%d, the others get no labels",
                self._socket,
                MAX_CONTAINERS,
                MAX_CONTAINERS,
            )

    async def _list(self, service: str) -> Any:
        """The decoded answer of `service`'s List."""
        module, request, response = _LISTS[service]
        pb = _messages(module)
        raw = await self._call(service, "List", getattr(pb, request)().SerializeToString())
        try:
            return getattr(pb, response).FromString(raw)
        except Exception as exc:  # protobuf's DecodeError (google.protobuf ships no stubs here)
            raise RuntimeUnavailable(f"{_short(service)}/List: undecodable ({exc})") from exc

    async def _call(self, service: str, method: str, request: bytes) -> bytes:
        """One unary call, as raw bytes in and out; only `READ_METHODS` can be named."""
        channel = self._client(service, method)
        try:
            return await channel.unary(
                f"/{service}/{method}", request, metadata=self._metadata, timeout=self._timeout
            )
        except RpcError as exc:
            raise await self._failed(service, method, exc) from exc

    async def _stream(
        self, service: str, method: str, request: bytes
    ) -> AsyncGenerator[bytes, None]:
        """One server-streaming call's messages as raw bytes; only `READ_METHODS` can be
        named. The timeout holds for the whole answer."""
        channel = self._client(service, method)
        answers = channel.stream(
            f"/{service}/{method}", request, metadata=self._metadata, timeout=self._timeout
        )
        async with contextlib.aclosing(answers):
            try:
                async for answer in answers:
                    yield answer
            except RpcError as exc:
                raise await self._failed(service, method, exc) from exc

    def _client(self, service: str, method: str) -> Client:
        path = f"{service}/{method}"
        if path not in READ_METHODS:
            raise ValueError(f"refusing to call {path}: not a read method")
        if not os.path.exists(self._socket):
            raise RuntimeUnavailable(f"socket {self._socket} does not exist")
        if self._channel is None:
            self._channel = Client(f"unix://{os.path.abspath(self._socket)}", _POLICY)
        return self._channel

    async def _failed(self, service: str, method: str, exc: RpcError) -> RuntimeUnavailable:
        """A failed call drops the connection and reads as the runtime being unavailable."""
        await self.close()
        detail = f"{exc.code.name} {exc.details}".strip()
        return RuntimeUnavailable(f"{_short(service)}/{method}: {detail}")


# Per service listed in one answer: the generated module, the List request and the List answer.
_LISTS = {TASKS: ("tasks_pb2", "ListTasksRequest", "ListTasksResponse")}


def _short(service: str) -> str:
    return service.rsplit(".", 1)[-1]


def _messages(module: str) -> Any:
    """Generated message classes (generated code is kept out of the type check)."""
    return importlib.import_module(f"otelgpu.processors.container_env._proto.{module}")


def _ref(container: Any, *, running: bool) -> ContainerRef:
    spec = container.spec
    updated = container.updated_at
    return ContainerRef(
        id=container.id,
        labels=dict(container.labels),
        revision=f"{updated.seconds}.{updated.nanos}",
        running=running,
        created=container.created_at.seconds + container.created_at.nanos / 1e9,
        sandbox_id=container.sandbox,
        # Any other spec type (a non-OCI runtime) carries nothing we can read.
        raw_spec=spec.value if spec.type_url.endswith(OCI_SPEC_TYPE) else b"",
    )
