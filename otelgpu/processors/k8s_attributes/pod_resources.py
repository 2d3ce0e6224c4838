"""The kubelet pod-resources v1 API, behind the narrow `PodResourcesClient` Protocol.

The adapter keeps one grpcio channel (otelgpu.configgrpc) to the unix socket. A kubelet
restart removes the socket and creates a new one (a new inode): the adapter notices the
change, or an UNAVAILABLE answer, and opens a new channel on the next call. List and
GetAllocatableResources only read, so the refresher may ask again after any failure.
Answers are turned into plain frozen dataclasses here, so nothing else in the processor sees
protobuf.

A kubelet lists its pods in a new order on most calls. `List` answers are split into their
pods' bytes (wire.py) and each pod is parsed once, then reused while its bytes come back:
the same pods in any order give the very same tuple, in the order of their bytes.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import stat
from dataclasses import dataclass
from typing import Any, Protocol

from otelgpu.configgrpc import ChannelPolicy, Client, RpcError, StatusCode
from otelgpu.processors.k8s_attributes.wire import WireError, split_pods


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """Devices of one extended resource (`nvidia.com/gpu`), as the device plugin names them."""

    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    """One device a DRA resource claim gave a container: the driver, its pool, the device's
    name in the pool (empty from kubelets before 1.31, which send only `cdi_devices`), the
    share ID when the device was allocated as a share, and the claim it came through."""

    driver: str
    pool: str
    device: str
    cdi_devices: tuple[str, ...] = ()
    share_id: str = ""
    claim_namespace: str = ""
    claim_name: str = ""


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    """What one container of a pod holds: device-plugin devices and DRA claim devices; a
    container without either holds nothing."""

    name: str
    devices: tuple[DeviceAllocation, ...]
    claims: tuple[ClaimDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAllocation:
    """One pod's containers and their devices, as `List` reports them."""

    namespace: str
    name: str
    containers: tuple[ContainerAllocation, ...]


class PodResourcesError(Exception):
    """A request failed. `code` is the gRPC status name (`RESOURCE_EXHAUSTED`,
    `UNAVAILABLE`, `DEADLINE_EXCEEDED`, ...) or `SOCKET_MISSING` when there is no socket."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(f"{code}: {message}" if message else code)


class PodResourcesClient(Protocol):
    """Reads the kubelet's device allocations.

    Both methods are bounded by the client's own timeout and raise `PodResourcesError`
    (never anything else) when the kubelet does not answer well. `close` releases the
    connection, is idempotent, and a later call may connect again.
    """

    async def list(self) -> tuple[PodAllocation, ...]:
        """Every pod on the node with the devices of each of its containers."""

    async def allocatable(self) -> tuple[DeviceAllocation, ...] | None:
        """Every device the kubelet knows, allocated or not; None when not served."""

    async def close(self) -> None:
        """Closes the connection."""


class GrpcPodResourcesClient:
    """`PodResourcesClient` over unary gRPC calls on the kubelet's unix socket. A failed call
    fails at once; the refresher's back-off decides when to dial again."""

    def __init__(
        self,
        socket_path: str,
        *,
        timeout: float,
        max_receive_message_size: int,
        max_backoff: float = 5.0,
    ) -> None:
        self._path = socket_path
        self._timeout = timeout
        # A List answer is at most this large; the kubelet never compresses it.
        self._policy = ChannelPolicy(
            max_receive=max_receive_message_size, max_backoff=max_backoff, proxy=False
        )
        self._channel: Client | None = None
        self._socket_id: tuple[int, int, int] | None = None
        self._allocatable_served = True
        self._pods = PodCache()

    async def list(self) -> tuple[PodAllocation, ...]:
        # The answer arrives as bytes and is split, parsed and converted in a worker thread:
        # at tens of thousands of pods that is hundreds of milliseconds the event loop (and
        # so every scrape) must not wait for. The same pods as last time, in any order, give
        # back the same tuple, which the refresher recognises at once.
        raw = await self._call("List", _messages().ListPodResourcesRequest())
        if self._pods.same_bytes(raw):
            return self._pods.pods
        return await asyncio.to_thread(parse_list, raw, self._pods)

    async def allocatable(self) -> tuple[DeviceAllocation, ...] | None:
        if not self._allocatable_served:
            return None
        pb = _messages()
        try:
            raw = await self._call("GetAllocatableResources", pb.AllocatableResourcesRequest())
        except PodResourcesError as exc:
            if exc.code != "UNIMPLEMENTED":
                raise
            # Kubelets before 1.23 (or with the feature gate off) lack it; don't ask again
            # on this connection.
            self._allocatable_served = False
            return None
        try:
            answer = pb.AllocatableResourcesResponse.FromString(raw)
        except Exception as exc:  # protobuf's DecodeError (google.protobuf ships no stubs here)
            raise PodResourcesError("INTERNAL", f"an undecodable answer: {exc}") from None
        return tuple(_devices(d) for d in answer.devices)

    async def close(self) -> None:
        channel, self._channel, self._socket_id = self._channel, None, None
        if channel is not None:
            await channel.close()

    async def _call(self, method: str, request: Any) -> bytes:
        """The answer's bytes; parsing is left to the caller (List's runs off the loop)."""
        channel = await self._connect()
        try:
            return await channel.unary(
                f"/{_SERVICE}/{method}", request.SerializeToString(), timeout=self._timeout
            )
        except RpcError as exc:
            if exc.code is StatusCode.UNAVAILABLE:
                await self.close()  # the kubelet went away: dial afresh next time
            raise PodResourcesError(exc.code.name, exc.details) from exc

    async def _connect(self) -> Client:
        """The channel to the socket file that exists now."""
        try:
            info = os.stat(self._path)
        except FileNotFoundError:
            await self.close()
            raise PodResourcesError("SOCKET_MISSING", f"no socket at {self._path}") from None
        except OSError as exc:
            await self.close()
            raise PodResourcesError("SOCKET_MISSING", f"{self._path}: {exc.strerror}") from None
        if not stat.S_ISSOCK(info.st_mode):
            await self.close()
            raise PodResourcesError("SOCKET_MISSING", f"{self._path} is not a socket")
        # A new socket file may reuse the old one's inode number; its change time is its own.
        socket_id = (info.st_dev, info.st_ino, info.st_ctime_ns)
        if self._channel is not None and socket_id != self._socket_id:
            await self.close()  # the kubelet restarted and made a new socket
        if self._channel is None:
            self._channel = Client(f"unix://{os.path.abspath(self._path)}", self._policy)
            self._socket_id = socket_id
            self._allocatable_served = True
        return self._channel


_PROTO = "otelgpu.processors.k8s_attributes._proto"
_SERVICE = "v1.PodResourcesLister"
MAX_NAME_LENGTH = 253  # Kubernetes names are at most 253 characters; a longer one is cut


def parse_list(raw: bytes, cache: PodCache | None = None) -> tuple[PodAllocation, ...]:
    """A `List` answer's bytes as pods, in the order of their bytes (not the kubelet's, which
    changes from call to call). Run off the event loop: it is the costly part. With a cache,
    only pods not in the last answer are parsed. Raises `WireError` on malformed bytes."""
    return (PodCache() if cache is None else cache).update(raw)


class PodCache:
    """The pods of the last `List` answer, parsed, by the bytes of each pod's entry.

    Only the pods of the latest answer are kept, so it holds one answer's worth at most. A
    pod whose entry changed in any byte is parsed afresh. Not for concurrent use: the client
    asks one `List` at a time.
    """

    def __init__(self) -> None:
        self._raw = b""
        self._by_entry: dict[bytes, PodAllocation] = {}
        self._repeats: list[bytes] | None = None  # sorted entries, kept only with repeats
        self.pods: tuple[PodAllocation, ...] = ()  # the latest answer's, sorted by entry

    def __len__(self) -> int:
        """How many distinct pod entries are kept (those of the latest answer)."""
        return len(self._by_entry)

    def same_bytes(self, raw: bytes) -> bool:
        """Whether `raw` is byte for byte the last answer (cheap: no split, no thread)."""
        return raw == self._raw

    def update(self, raw: bytes) -> tuple[PodAllocation, ...]:
        """The pods of `raw`; the very tuple of last time when the same pods came back in
        any order (as a multiset: a repeated entry counts). Unchanged on error."""
        entries = split_pods(raw)
        if not self._same_pods(entries):
            entries.sort()  # bytes order: the same pods give the same order
            known = self._by_entry
            by_entry: dict[bytes, PodAllocation] = {}
            for entry in entries:
                found = known.get(entry) or by_entry.get(entry)
                by_entry[entry] = found or _parse_pod(entry)
            self.pods = tuple(by_entry[e] for e in entries)
            self._by_entry = by_entry
            self._repeats = entries if len(by_entry) < len(entries) else None
        self._raw = raw
        return self.pods

    def _same_pods(self, entries: list[bytes]) -> bool:
        # A set comparison (hashing, no sort) when no entry repeats, which is every real
        # answer: equal sizes, equal sets and no repeats make equal multisets.
        if len(entries) != len(self.pods):
            return False
        if self._repeats is not None:
            return sorted(entries) == self._repeats
        unique = set(entries)
        return len(unique) == len(entries) and unique == self._by_entry.keys()


def _parse_pod(entry: bytes) -> PodAllocation:
    try:
        message = _messages().PodResources.FromString(entry)
    except Exception as exc:  # protobuf's DecodeError (google.protobuf ships no stubs here)
        raise WireError(
            f"a {len(entry)}-byte pod_resources entry is not a PodResources message: {exc}"
        ) from None
    return _pod(message)


# The generated stubs are untyped: loaded by name so the type checker treats them as Any
# instead of checking generated code.
def _messages() -> Any:
    return importlib.import_module(f"{_PROTO}.podresources_pb2")


def _devices(message: Any) -> DeviceAllocation:
    return DeviceAllocation(str(message.resource_name), tuple(str(i) for i in message.device_ids))


def _pod(message: Any) -> PodAllocation:
    containers = tuple(
        ContainerAllocation(
            _name(c.name), tuple(_devices(d) for d in c.devices), _claims(c.dynamic_resources)
        )
        for c in message.containers
    )
    return PodAllocation(_name(message.namespace), _name(message.name), containers)


def _claims(dynamic_resources: Any) -> tuple[ClaimDevice, ...]:
    """Every device of every DRA claim of one container (none from kubelets that do not
    fill `dynamic_resources`)."""
    return tuple(
        ClaimDevice(
            driver=str(r.driver_name),
            pool=_name(r.pool_name),
            device=_name(r.device_name),
            cdi_devices=tuple(_name(d.name) for d in r.cdi_devices),
            share_id=_name(r.share_id),
            claim_namespace=_name(claim.claim_namespace),
            claim_name=_name(claim.claim_name),
        )
        for claim in dynamic_resources
        for r in claim.claim_resources
    )


def _name(value: object) -> str:
    """A Kubernetes name as a label value: a kubelet never sends more than 253 characters, so
    anything longer is cut rather than carried onto every series."""
    return str(value)[:MAX_NAME_LENGTH]
