"""The parsed-pod cache behind `GrpcPodResourcesClient.list`: a kubelet lists its pods in a new
order on most calls (a Go map), and that alone must not cost a parse or a snapshot rebuild."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from otelgpu.processors.k8s_attributes import pod_resources as module
from otelgpu.processors.k8s_attributes._proto import podresources_pb2 as pb
from otelgpu.processors.k8s_attributes.pod_resources import (
    GrpcPodResourcesClient,
    PodCache,
    parse_list,
)
from otelgpu.processors.k8s_attributes.wire import WireError
from tests.peers.kubelet import FakeKubelet, claim, claim_device, container, pod
from tests.unit.processors.k8s_attributes.fakes import GPU, UUID_A, UUID_B

TRAIN = pod("ml", "train-0", container("trainer", {GPU: [UUID_A]}))
DRA = pod("ml", "dra-0", container("c", None, claim("gpu", "ml", claim_device("gpu-1"))))
IDLE = pod("kube-system", "idle", container("pause"))
SERVE = pod("web", "serve-0", container("server", {GPU: [UUID_B]}))


def answer(*pods: pb.PodResources) -> bytes:
    return pb.ListPodResourcesResponse(pod_resources=list(pods)).SerializeToString()


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the pods parsed, in order."""
    names: list[str] = []
    convert = module._pod

    def counting(message: Any) -> module.PodAllocation:
        names.append(message.name)
        return convert(message)

    monkeypatch.setattr(module, "_pod", counting)
    return names


def test_the_same_pods_in_another_order_give_the_same_tuple_without_parsing(parsed):
    cache = PodCache()
    first = cache.update(answer(TRAIN, DRA, IDLE))
    assert sorted(parsed) == ["dra-0", "idle", "train-0"]
    assert cache.update(answer(IDLE, TRAIN, DRA)) is first
    assert cache.update(answer(DRA, IDLE, TRAIN)) is first
    assert len(parsed) == 3


def test_pods_come_back_in_the_order_of_their_bytes_whatever_the_kubelet_order():
    one, other = PodCache(), PodCache()
    assert one.update(answer(TRAIN, DRA, IDLE)) == other.update(answer(IDLE, DRA, TRAIN))
    assert parse_list(answer(SERVE, TRAIN)) == parse_list(answer(TRAIN, SERVE))
    by_bytes = sorted([TRAIN, DRA, IDLE], key=lambda p: p.SerializeToString())
    assert [p.name for p in one.pods] == [p.name for p in by_bytes]


def test_only_changed_pods_are_parsed_and_unchanged_ones_are_reused(parsed):
    cache = PodCache()
    first = {p.name: p for p in cache.update(answer(TRAIN, DRA, IDLE))}
    parsed.clear()
    moved = pod("ml", "train-0", container("trainer", {GPU: [UUID_B]}))  # same pod, new GPU
    second = {p.name: p for p in cache.update(answer(IDLE, moved, DRA, SERVE))}
    assert sorted(parsed) == ["serve-0", "train-0"]
    assert second["idle"] is first["idle"] and second["dra-0"] is first["dra-0"]
    assert second["train-0"].containers[0].devices[0].device_ids == (UUID_B,)


def test_only_the_latest_answers_pods_are_kept(parsed):
    cache = PodCache()
    cache.update(answer(TRAIN, DRA, IDLE))
    cache.update(answer(IDLE))
    assert len(cache) == 1
    parsed.clear()
    cache.update(answer(IDLE, TRAIN))  # gone, so parsed again when it returns
    assert parsed == ["train-0"]
    cache.update(answer())
    assert len(cache) == 0 and cache.pods == ()


def test_a_repeated_entry_counts_as_a_multiset():
    cache = PodCache()
    twice = cache.update(answer(TRAIN, TRAIN, IDLE))
    assert len(twice) == 3 and len(cache) == 2
    assert cache.update(answer(IDLE, TRAIN, TRAIN)) is twice
    other = cache.update(answer(TRAIN, IDLE, IDLE))  # same size, same set, other counts
    assert other is not twice and [p.name for p in other].count("idle") == 2
    assert cache.update(answer(TRAIN, IDLE)) != other


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (answer(TRAIN) + b"\x0a\x05ab", "field 1 at byte "),  # an entry cut short
        # a pod whose own bytes are malformed
        (b"\x0a\x02\x0a\x80", "a 2-byte pod_resources entry is not a PodResources message"),
    ],
)
def test_a_malformed_answer_raises_and_leaves_the_cache_as_it_was(parsed, raw, reason):
    cache = PodCache()
    first = cache.update(answer(TRAIN, IDLE))
    with pytest.raises(WireError, match=reason):
        cache.update(raw)
    assert cache.pods is first and len(cache) == 2
    assert cache.update(answer(IDLE, TRAIN)) is first


class ShufflingKubelet(FakeKubelet):
    """Lists its pods in a new order on every call, as a real kubelet does."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = random.Random(3)

    async def List(self, request: Any, context: Any) -> pb.ListPodResourcesResponse:
        self.rng.shuffle(self.pods)
        return await super().List(request, context)


@pytest.fixture
async def kubelet() -> AsyncIterator[ShufflingKubelet]:
    server = ShufflingKubelet()
    await server.start()
    yield server
    await server.close()


async def test_the_grpc_client_returns_the_same_tuple_for_the_same_pods_in_any_order(
    kubelet: ShufflingKubelet,
) -> None:
    kubelet.set_pods(*(pod("ml", f"p{i}", container("c", {GPU: [UUID_A]})) for i in range(20)))
    client = GrpcPodResourcesClient(
        str(kubelet.socket), timeout=5.0, max_receive_message_size=1 << 20
    )
    try:
        first = await client.list()
        for _ in range(3):
            assert await client.list() is first
        kubelet.pods.pop()
        assert len(await client.list()) == 19
    finally:
        await client.close()
