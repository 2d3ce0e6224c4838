"""What a hostile containerd costs the containerd adapter: its answers in 1-byte DATA frames
(tests/unit/configgrpc/hostile.py), the adapter in a child process whose memory is watched."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otelgpu.processors.container_env.containerd import MAX_CONTAINERS, ContainerdRuntime
from otelgpu.processors.container_env.runtime import RuntimeUnavailable
from tests.unit.configgrpc.hostile import HostileServer
from tests.unit.configgrpc.measured import Measured, MiB, measured_containerd_list

CONTAINERS = 256
SPEC = 64 * 2**10  # 16 MiB of records in all


async def _listed(tmp_path: Path, mode: str) -> Measured:
    server = HostileServer(tmp_path / f"{mode}.sock", answer_size=SPEC, containers=CONTAINERS)
    server.mode = "containerd"  # the warm-up lists one container
    await server.start()
    try:
        return await measured_containerd_list(server, mode, timeout=120)
    finally:
        await server.stop()


async def test_a_listing_in_one_byte_frames_costs_per_container_not_per_node(
    tmp_path: Path,
) -> None:
    # 256 containers with a 64 KiB spec each, every byte in a DATA frame of its own, against
    # the same listing in ordinary frames (what the records themselves cost). grpcio holds
    # about 16 bytes per byte of a message while it arrives in such frames: read as one
    # message (Containers/List) the 16 MiB cost over 128 MiB more; one message per container
    # (Containers/ListStream, the receive window no wider than the message being read) costs
    # about 1 MiB at a time. The bound: less than 16 MiB more than ordinary frames.
    plain = await _listed(tmp_path, "containerd_many")
    tiny = await _listed(tmp_path, "containerd_tiny_frames")
    assert plain.outcome == tiny.outcome == str(CONTAINERS), (plain, tiny)
    extra = tiny.growth - plain.growth
    print(
        f"{CONTAINERS} containers of {SPEC // 1024} KiB: {plain.growth / MiB:.1f} MiB, "
        f"in 1-byte frames {tiny.growth / MiB:.1f} MiB"
    )
    assert extra < 16 * MiB, (plain, tiny)


async def test_a_record_over_the_message_limit_fails_the_listing_in_bounded_memory(
    tmp_path: Path,
) -> None:
    # One container whose record is larger than MAX_MESSAGE: grpcio refuses it from its
    # declared length, before reading it, so it costs nothing like its size.
    server = HostileServer(tmp_path / "big.sock", "containerd", answer_size=64 * MiB, containers=1)
    await server.start()
    try:
        listed = await measured_containerd_list(server, "containerd_many", timeout=60)
    finally:
        await server.stop()
    assert listed.outcome == "RESOURCE_EXHAUSTED", listed
    print(f"one 64 MiB record: {listed.growth / MiB:.1f} MiB")
    assert listed.growth < 16 * MiB, listed


@pytest.mark.parametrize(
    ("spec", "read"), [(4 * MiB - 16 * 2**10, True), (4 * MiB + 16 * 2**10, False)]
)
async def test_a_record_is_read_up_to_4_mib(tmp_path: Path, spec: int, read: bool) -> None:
    """Real records are tens of KiB; 4 MiB holds every real one, and one over it fails the
    listing (the runtime reads as unavailable) rather than being read."""
    server = HostileServer(
        tmp_path / "edge.sock", "containerd_many", answer_size=spec, containers=1
    )
    await server.start()
    runtime = ContainerdRuntime(str(server.socket), "k8s.io", 60)
    try:
        if read:
            (ref,) = await runtime.list_containers()
            assert len(ref.raw_spec) == spec
        else:
            with pytest.raises(RuntimeUnavailable, match="RESOURCE_EXHAUSTED"):
                await runtime.list_containers()
    finally:
        await runtime.close()
        await server.stop()


async def test_a_listing_past_the_container_cap_keeps_the_first_ones_counted_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = HostileServer(
        tmp_path / "cap.sock", "containerd_many", answer_size=16, containers=MAX_CONTAINERS + 1
    )
    await server.start()
    runtime = ContainerdRuntime(str(server.socket), "k8s.io", 60)
    try:
        with caplog.at_level(logging.WARNING, "otelgpu.processors.container_env"):
            first = await runtime.list_containers()
            assert len(caplog.records) == 1  # said at the first cut
            second = await runtime.list_containers()
    finally:
        await runtime.close()
        await server.stop()
    assert len(first) == len(second) == MAX_CONTAINERS
    assert [r.id for r in first] == [f"{n:064x}" for n in range(MAX_CONTAINERS)]
    assert runtime.listings_cut == 2
    cut = [r for r in caplog.records if "more than 16384 containers" in r.getMessage()]
    assert len(cut) == 1, caplog.text
    assert cut[0].name == "otelgpu.processors.container_env"  # the processor's log, as its others
    # the connection outlives the call given up: both listings and tasks on one
    assert server.connections == 1 and server.calls == 4
