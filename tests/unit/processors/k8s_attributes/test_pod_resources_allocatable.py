"""The grpcio pod-resources client's `GetAllocatableResources` against a real pod-resources
server on a unix socket (`tests.peers.kubelet.FakeKubelet`): asked before anything else, asked
once per connection when the kubelet lacks it, and asked again on the connection to a kubelet
that came back, or that restarted between two calls."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from otelgpu.processors.k8s_attributes.pod_resources import (
    DeviceAllocation,
    GrpcPodResourcesClient,
    PodResourcesError,
)
from tests.peers.kubelet import FakeKubelet, kubelet
from tests.peers.kubelet import container as pb_container
from tests.peers.kubelet import pod as pb_pod
from tests.unit.processors.k8s_attributes.fakes import GPU, UUID_A, UUID_B

__all__ = ["kubelet"]  # the pytest fixture, imported for use here


def _client(kubelet: FakeKubelet) -> GrpcPodResourcesClient:
    return GrpcPodResourcesClient(
        str(kubelet.socket), timeout=5.0, max_receive_message_size=1 << 20
    )


async def test_allocatable_devices_are_answered_by_a_fresh_client_before_any_list(
    kubelet: FakeKubelet,
) -> None:
    kubelet.set_allocatable({GPU: [UUID_A, UUID_B]})
    client = _client(kubelet)
    try:
        assert await client.allocatable() == (DeviceAllocation(GPU, (UUID_A, UUID_B)),)
        assert kubelet.count("GetAllocatableResources") == 1
    finally:
        await client.close()


async def test_a_fresh_client_asking_for_allocatable_devices_with_no_socket_gets_socket_missing(
    kubelet: FakeKubelet,
) -> None:
    kubelet.remove_socket()
    client = _client(kubelet)
    try:
        with pytest.raises(PodResourcesError) as info:
            await client.allocatable()
        assert info.value.code == "SOCKET_MISSING"
    finally:
        await client.close()


async def test_a_socket_path_the_system_cannot_stat_is_socket_missing_with_its_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / "kubelet.sock"  # under a file: ENOTDIR
    client = GrpcPodResourcesClient(str(path), timeout=5.0, max_receive_message_size=1 << 20)
    try:
        with pytest.raises(PodResourcesError) as info:
            await client.list()
    finally:
        await client.close()
    assert (info.value.code, str(info.value)) == (
        "SOCKET_MISSING",
        f"SOCKET_MISSING: {path}: {os.strerror(errno.ENOTDIR)}",
    )


async def test_an_undecodable_allocatable_answer_is_internal_and_says_so(
    kubelet: FakeKubelet, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _client(kubelet)

    async def garbage(method: str, request: object) -> bytes:
        return b"\xff\xff\xff"

    monkeypatch.setattr(client, "_call", garbage)
    try:
        with pytest.raises(PodResourcesError) as info:
            await client.allocatable()
    finally:
        await client.close()
    assert info.value.code == "INTERNAL"
    assert str(info.value).startswith("INTERNAL: an undecodable answer: ")


async def test_a_kubelet_back_with_get_allocatable_resources_is_asked_for_it_again(
    kubelet: FakeKubelet,
) -> None:
    kubelet.allocatable_served = False  # an old kubelet (or the feature gate off)
    kubelet.set_pods(pb_pod("ml", "p", pb_container("c", {GPU: [UUID_A]})))
    client = _client(kubelet)
    try:
        assert await client.allocatable() is None
        assert len(await client.list()) == 1
        assert await client.allocatable() is None  # not asked again on this connection
        assert kubelet.count("GetAllocatableResources") == 1
        # The kubelet goes away and comes back upgraded, now serving the method.
        await kubelet.stop()
        with pytest.raises(PodResourcesError) as info:
            await client.list()
        assert info.value.code == "SOCKET_MISSING"
        kubelet.allocatable_served = True
        kubelet.set_allocatable({GPU: [UUID_A, UUID_B]})
        await kubelet.start()
        assert len(await client.list()) == 1  # on a new connection
        assert await client.allocatable() == (DeviceAllocation(GPU, (UUID_A, UUID_B)),)
    finally:
        await client.close()


async def test_a_kubelet_restarted_between_two_calls_is_asked_for_allocatable_devices_again(
    kubelet: FakeKubelet,
) -> None:
    """No call sees the kubelet down: the new socket file (which may reuse the old one's inode
    number) is what tells the restart."""
    kubelet.allocatable_served = False
    client = _client(kubelet)
    try:
        assert await client.allocatable() is None
        kubelet.allocatable_served = True  # the kubelet comes back upgraded
        kubelet.set_allocatable({GPU: [UUID_A]})
        await kubelet.restart()
        assert await client.list() == ()  # the refresher lists first, then asks for devices
        assert await client.allocatable() == (DeviceAllocation(GPU, (UUID_A,)),)
    finally:
        await client.close()
