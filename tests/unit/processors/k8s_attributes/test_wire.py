"""The `List` answer splitter: the same pods protobuf finds, the bytes it would serialize (pods of
16 KiB and more, unknown fields up to the largest number, unknown groups), and a clear
`WireError` for bytes protobuf would refuse."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import example, given, settings
from hypothesis import strategies as st

from otelgpu.processors.k8s_attributes._proto import podresources_pb2 as pb
from otelgpu.processors.k8s_attributes.wire import WireError, read_pods, split_pods
from tests.peers.kubelet import claim, claim_device, container, pod

names = st.text(max_size=20)
ids = st.lists(st.text(max_size=12), max_size=3)
claim_devices = st.builds(
    claim_device,
    names,
    pool=names,
    driver=st.sampled_from(["gpu.nvidia.com", "", "other.example.com"]),
    cdi=ids,
    share_id=st.none() | names,
)
claims = st.builds(claim, names, names, *[claim_devices] * 2)
containers = st.builds(
    container,
    names,
    st.none() | st.dictionaries(st.text(max_size=16), ids, max_size=2),
    claims,
)
pods = st.builds(pod, names, names, containers, containers) | st.builds(
    pb.PodResources,
    name=st.text(max_size=300),  # a length of two bytes
)


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


def tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


# Fields a newer kubelet might add to ListPodResourcesResponse, in every wire type.
fields = st.integers(2, (1 << 29) - 1)
unknown = st.one_of(
    st.builds(lambda f, v: tag(f, 0) + varint(v), fields, st.integers(0, (1 << 64) - 1)),
    st.builds(lambda f, b: tag(f, 1) + b, fields, st.binary(min_size=8, max_size=8)),
    st.builds(lambda f, b: tag(f, 2) + varint(len(b)) + b, fields, st.binary(max_size=300)),
    st.builds(lambda f, b: tag(f, 5) + b, fields, st.binary(min_size=4, max_size=4)),
    st.builds(
        lambda f, v: tag(f, 3) + tag(9, 0) + varint(v) + tag(f, 4),
        fields,
        st.integers(0, (1 << 64) - 1),
    ),
    # pod_resources' own number in another wire type: protobuf keeps it as an unknown field
    st.builds(lambda v: tag(1, 0) + varint(v), st.integers(0, 1 << 20)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(pods, st.lists(unknown, max_size=2)), max_size=8))
def test_each_pod_entry_is_what_protobuf_serializes(
    parts: list[tuple[pb.PodResources, list[bytes]]],
):
    # A repeated field may be written one entry at a time, with other fields between.
    raw = b"".join(
        b"".join(extra) + pb.ListPodResourcesResponse(pod_resources=[p]).SerializeToString()
        for p, extra in parts
    )
    entries = split_pods(raw)
    assert entries == [p.SerializeToString() for p, _ in parts]
    assert read_pods(raw) == entries  # the hand reader that explains refusals agrees
    whole = pb.ListPodResourcesResponse.FromString(raw).pod_resources
    assert [pb.PodResources.FromString(e) for e in entries] == list(whole)


def test_a_whole_answer_with_dra_claims_splits_into_its_pods():
    listed = [
        pod("ml", "train-0", container("trainer", {"nvidia.com/gpu": ["GPU-a"]})),
        pod("ml", "dra-0", container("c", None, claim("gpu", "ml", claim_device("gpu-0")))),
        pod("kube-system", "idle", container("pause")),
    ]
    raw = pb.ListPodResourcesResponse(pod_resources=listed).SerializeToString()
    assert split_pods(raw) == [p.SerializeToString() for p in listed]
    assert split_pods(b"") == []


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


def _protobuf_pods(raw: bytes) -> list[bytes] | None:
    try:
        return [
            p.SerializeToString() for p in pb.ListPodResourcesResponse.FromString(raw).pod_resources
        ]
    except DecodeError:
        return None


def _our_pods(raw: bytes) -> list[bytes] | None:
    try:
        return [pb.PodResources.FromString(e).SerializeToString() for e in split_pods(raw)]
    except (WireError, DecodeError):
        return None


# Bytes biased towards tags and lengths, so that most inputs are almost well formed.
wire_bytes = st.lists(
    st.sampled_from([0x0A, 0x08, 0x0B, 0x0C, 0x13, 0x14, 0x00, 0x80, 0xFF, 0x01, 0x12, 0x0D, 0x09])
    | st.integers(0, 255),
    max_size=24,
).map(bytes)


@settings(max_examples=500, deadline=None)
@given(wire_bytes | st.binary(max_size=64))
@example(b"\x0b\x00\x0d\x0c")  # field 0 inside an unknown group: protobuf does not look
@example(b"\x8a\x00")  # a tag written in two bytes
def test_any_bytes_split_and_parse_as_protobuf_parses_them(raw: bytes):
    """Splitting, then parsing each pod, fails exactly when protobuf fails on the whole answer,
    and otherwise finds the same pods."""
    assert _our_pods(raw) == _protobuf_pods(raw)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\x0a\x05abc", "field 1 at byte 2: length 5 runs past the end of the 5-byte answer"),
        (b"\x0a", "the 1-byte answer is cut short in its last field"),
        (b"\x0a\x80", "the 2-byte answer is cut short in its last field"),
        (b"\x10\x80\x80", "byte 1: varint cut short by the end of the answer"),
        (b"\x10" + b"\xff" * 10 + b"\x01", "byte 1: varint longer than 10 bytes"),
        (b"\x00\x01", "byte 0: field number 0 is out of range"),
        (b"\x0e", "byte 0: field 1 has wire type 6, which does not exist"),
        (b"\x0c", "byte 1: field 1 ends a group that was never started"),
        (b"\x0b\x10\x01", "group 1 is never closed"),
        (b"\x0b\x14", "byte 1: group 1 closed as group 2"),
        (b"\x11\x01\x02", "byte 1: field 2 is cut short"),
        (b"\x1a\x09ab", "field 3 at byte 2: length 9 runs past the end of the 4-byte answer"),
        (b"\x0b" * 101, "byte 101: groups nested deeper than 100"),
    ],
)
def test_malformed_answers_are_refused_saying_where(raw: bytes, reason: str):
    with pytest.raises(WireError, match="^" + reason.replace("(", r"\(")):
        split_pods(raw)
    with pytest.raises(DecodeError):  # and protobuf agrees they are malformed
        pb.ListPodResourcesResponse.FromString(raw)


MAX_FIELD = (1 << 29) - 1  # protobuf's largest field number


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


@settings(max_examples=300, deadline=None)
@given(wire_bytes)
def test_the_hand_reader_refuses_what_protobuf_refuses(raw: bytes):
    """split_pods asks protobuf; read_pods only explains a refusal, so they must agree on what
    is well formed (and on the entries when it is)."""
    try:
        ours: list[bytes] | None = read_pods(raw)
    except WireError:
        ours = None
    try:
        theirs: list[bytes] | None = split_pods(raw)
    except WireError:
        theirs = None
    assert ours == theirs
