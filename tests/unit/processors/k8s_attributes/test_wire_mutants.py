"""The `List` answer splitter at the corners mutation testing showed no test held
(docs/dev/mutation.md): the largest field number, pods of 16 KiB and more (lengths of three
bytes and more), and unknown groups holding length-delimited fields."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError

from otelgpu.processors.k8s_attributes._proto import podresources_pb2 as pb
from otelgpu.processors.k8s_attributes.wire import WireError, read_pods, split_pods
from tests.unit.processors.k8s_attributes.test_wire import tag, varint

MAX_FIELD = (1 << 29) - 1  # protobuf's largest field number


def pod_of_size(size: int, name: str = "x") -> pb.PodResources:
    """A pod whose serialized entry is exactly `size` bytes long."""
    filler = size
    for _ in range(8):
        pod = pb.PodResources(name=name, namespace="n" * filler)
        excess = len(pod.SerializeToString()) - size
        if excess == 0:
            return pod
        filler -= excess
    raise AssertionError(f"no pod serializes to exactly {size} bytes")


def answer(*pods: pb.PodResources) -> bytes:
    return pb.ListPodResourcesResponse(pod_resources=list(pods)).SerializeToString()


@pytest.mark.parametrize("field", [16, 2047, 2048, MAX_FIELD])
def test_unknown_fields_up_to_the_largest_number_are_skipped(field: int):
    pod = pb.PodResources(name="train-0", namespace="ml")
    raw = tag(field, 0) + varint(7) + answer(pod) + tag(field, 2) + varint(2) + b"ab"
    assert split_pods(raw) == read_pods(raw) == [pod.SerializeToString()]


def test_a_field_number_past_the_largest_is_refused_saying_where():
    raw = answer(pb.PodResources(name="p")) + tag(MAX_FIELD + 1, 0) + varint(7)
    with pytest.raises(WireError, match=r"^byte 5: field number 536870912 is out of range$"):
        split_pods(raw)
    with pytest.raises(DecodeError):  # and protobuf agrees
        pb.ListPodResourcesResponse.FromString(raw)


@pytest.mark.parametrize("size", [16383, 16384, 16385, 20000, 1 << 21])
def test_pods_of_16_kib_and_more_are_split_whole(size: int):
    """From 16 KiB a pod's length takes three bytes (16384 is 0x80 0x80 0x01), from 2 MiB four."""
    pods = [pod_of_size(size, "big"), pb.PodResources(name="small"), pod_of_size(size, "also")]
    raw = answer(*pods)
    entries = [p.SerializeToString() for p in pods]
    assert [len(e) for e in entries] == [size, len(entries[1]), size]
    assert split_pods(raw) == entries
    assert read_pods(raw) == entries  # the reader that explains refusals agrees


@pytest.mark.parametrize("size", [16384, 20000])
def test_a_cut_answer_after_a_big_pod_names_the_byte_of_the_cut_field(size: int):
    raw = answer(pod_of_size(size)) + b"\x0a\x05abc"
    where = size + 4 + 2  # the big pod's tag and length, its bytes, the cut field's tag and length
    with pytest.raises(
        WireError,
        match=rf"^field 1 at byte {where}: length 5 runs past the end of the {len(raw)}-byte",
    ):
        split_pods(raw)


GROUP = tag(5, 3) + tag(2, 2) + varint(3) + b"abc" + tag(3, 2) + varint(0) + tag(5, 4)


def test_an_unknown_group_holding_strings_is_skipped_as_protobuf_skips_it():
    pods = [pb.PodResources(name="a"), pb.PodResources(name="b")]
    raw = GROUP + answer(pods[0]) + GROUP + answer(pods[1])
    assert list(pb.ListPodResourcesResponse.FromString(raw).pod_resources) == pods
    assert read_pods(raw) == split_pods(raw) == [p.SerializeToString() for p in pods]


def test_a_cut_answer_after_an_unknown_group_of_strings_names_the_byte_of_the_cut_field():
    raw = GROUP + answer(pb.PodResources(name="a")) + b"\x0a\x05abc"
    where = len(GROUP) + 5 + 2
    with pytest.raises(WireError, match=rf"^field 1 at byte {where}: length 5 runs past the end"):
        split_pods(raw)
