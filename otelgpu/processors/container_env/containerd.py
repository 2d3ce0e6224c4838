"""containerd adapter: the containers and tasks APIs over gRPC on containerd's unix socket,
read-only."""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
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
READ_METHODS = frozenset({f"{CONTAINERS}/List", f"{CONTAINERS}/Get", f"{TASKS}/List"})
NAMESPACE_HEADER = "containerd-namespace"
OCI_SPEC_TYPE = "types.containerd.io/opencontainers/runtime-spec/1/Spec"

# Task states (containerd.v1.types.Status) of a live container. The CRI plugin keeps a
# task for every running container and for a ready sandbox's pause container; an exited
# container's task is STOPPED or gone. A paused container is still alive (docker's
# `State.Running` is true while paused too); PAUSING is on its way there.
_RUNNING, _PAUSED, _PAUSING = 2, 4, 5
LIVE_TASK_STATES = frozenset({_RUNNING, _PAUSED, _PAUSING})

# containerd answers List with every container's full OCI spec; a busy node's answer
# exceeds gRPC's 4 MiB default long before it is unreasonable.
_MAX_MESSAGE = 256 * 2**20
# Every call only reads (List), so the refresh loop may ask again after any failure.
_POLICY = ChannelPolicy(max_receive=_MAX_MESSAGE, proxy=False)


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

    @property
    def name(self) -> str:
        return "containerd"

    @property
    def endpoint(self) -> str:
        return self._socket

    async def list_containers(self) -> Sequence[ContainerRef]:
        containers = await self._list(CONTAINERS)
        # Tasks after records: a container that starts in between reads as not running
        # until the next refresh, one that ends in between reads as ended. Never the reverse.
        tasks = await self._list(TASKS)
        live = {t.container_id or t.id for t in tasks.tasks if t.status in LIVE_TASK_STATES}
        return [_ref(c, running=c.id in live) for c in containers.containers]

    async def container_spec(self, ref: ContainerRef, *, env: bool) -> ContainerSpec | None:
        if not ref.raw_spec:
            return ContainerSpec(valid=False)
        return decode_oci_spec(ref.raw_spec)

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

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
        path = f"{service}/{method}"
        name = f"{_short(service)}/{method}"
        if path not in READ_METHODS:
            raise ValueError(f"refusing to call {path}: not a read method")
        if not os.path.exists(self._socket):
            raise RuntimeUnavailable(f"socket {self._socket} does not exist")
        if self._channel is None:
            self._channel = Client(f"unix://{os.path.abspath(self._socket)}", _POLICY)
        try:
            return await self._channel.unary(
                f"/{path}", request, metadata=self._metadata, timeout=self._timeout
            )
        except RpcError as exc:
            await self.close()
            detail = f"{exc.code.name} {exc.details}".strip()
            raise RuntimeUnavailable(f"{name}: {detail}") from exc


# Per service: the generated module, the List request and the List answer.
_LISTS = {
    CONTAINERS: ("containers_pb2", "ListContainersRequest", "ListContainersResponse"),
    TASKS: ("tasks_pb2", "ListTasksRequest", "ListTasksResponse"),
}


def _short(service: str) -> str:
    return service.rsplit(".", 1)[-1]


def _messages(module: str) -> Any:
    """Generated message classes (generated code is kept out of the type check)."""
    return importlib.import_module(f"otelgpu.processors.container_env._proto.{module}")


def _ref(container: Any, *, running: bool = False) -> ContainerRef:
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
