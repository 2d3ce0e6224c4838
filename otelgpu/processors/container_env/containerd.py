"""containerd adapter: the containers API over gRPC on containerd's unix socket, read-only."""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Any

import grpc
import grpc.aio

from otelgpu.processors.container_env.runtime import (
    ContainerRef,
    ContainerSpec,
    RuntimeUnavailable,
    decode_oci_spec,
)

SERVICE = "containerd.services.containers.v1.Containers"
# The only methods this client can call: it is built from this list, not from the
# generated stub, so a create, update or delete cannot be sent by mistake.
READ_METHODS = frozenset({"List", "Get"})
NAMESPACE_HEADER = "containerd-namespace"
OCI_SPEC_TYPE = "types.containerd.io/opencontainers/runtime-spec/1/Spec"

# containerd answers List with every container's full OCI spec; a busy node's answer
# exceeds gRPC's 4 MiB default long before it is unreasonable.
_MAX_MESSAGE = 256 * 2**20
_CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", _MAX_MESSAGE),
    # A restarted containerd should be seen at the next refresh, not after gRPC's backoff.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class ContainerdRuntime:
    """`ContainerRuntime` over containerd's containers service in one namespace (`k8s.io`).

    The channel is opened on first use and dropped after any failure, so a containerd that
    was restarted (a new socket at the same path) is reached on the next refresh.
    """

    def __init__(self, socket: str, namespace: str, timeout: float) -> None:
        self._socket = socket
        self._metadata = ((NAMESPACE_HEADER, namespace),)
        self._timeout = timeout
        self._channel: grpc.aio.Channel | None = None

    @property
    def name(self) -> str:
        return "containerd"

    @property
    def endpoint(self) -> str:
        return self._socket

    async def list_containers(self) -> Sequence[ContainerRef]:
        pb = _messages()
        raw = await self._call("List", pb.ListContainersRequest().SerializeToString())
        try:
            response = pb.ListContainersResponse.FromString(raw)
        except Exception as exc:  # protobuf's DecodeError (google.protobuf ships no stubs here)
            raise RuntimeUnavailable(f"List: undecodable answer ({exc})") from exc
        return [_ref(c) for c in response.containers]

    async def container_spec(self, ref: ContainerRef, *, env: bool) -> ContainerSpec | None:
        if not ref.raw_spec:
            return ContainerSpec(valid=False)
        return decode_oci_spec(ref.raw_spec)

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    async def _call(self, method: str, request: bytes) -> bytes:
        """One unary call, as raw bytes in and out; only `READ_METHODS` can be named."""
        if method not in READ_METHODS:
            raise ValueError(f"refusing to call {SERVICE}/{method}: not a read method")
        if not os.path.exists(self._socket):
            raise RuntimeUnavailable(f"socket {self._socket} does not exist")
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(
                f"unix://{self._socket}", options=_CHANNEL_OPTIONS
            )
        call = self._channel.unary_unary(f"/{SERVICE}/{method}")
        try:
            response: bytes = await call(request, metadata=self._metadata, timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            await self.close()
            detail = f"{exc.code().name} {exc.details() or ''}".strip()
            raise RuntimeUnavailable(f"{method}: {detail}") from exc
        return response


def _messages() -> Any:
    """The generated message classes (generated code is kept out of the type check)."""
    return importlib.import_module("otelgpu.processors.container_env._proto.containers_pb2")


def _ref(container: Any) -> ContainerRef:
    spec = container.spec
    updated = container.updated_at
    return ContainerRef(
        id=container.id,
        labels=dict(container.labels),
        revision=f"{updated.seconds}.{updated.nanos}",
        created=container.created_at.seconds + container.created_at.nanos / 1e9,
        sandbox_id=container.sandbox,
        # Any other spec type (a non-OCI runtime) carries nothing we can read.
        raw_spec=spec.value if spec.type_url.endswith(OCI_SPEC_TYPE) else b"",
    )
