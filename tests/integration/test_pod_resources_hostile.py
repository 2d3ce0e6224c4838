"""The k8s_attributes processor against a kubelet socket whose server turns hostile, then
sane: the refresh fails and is counted, the source is said down once, memory stays bounded
(tests/unit/configgrpc shows the bound), and the next refresh after the peer is sane answers."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.integration.test_pod_resources import wait_for
from tests.unit.configgrpc.hostile import HostileServer
from tests.unit.configgrpc.measured import MiB, measured_call
from tests.unit.processors.k8s_attributes.fakes import series

pytestmark = pytest.mark.integration

ERRORS = "otelgpu_pod_resources_errors_total"
UP = "otelgpu_source_up"


@pytest.mark.parametrize(
    ("attack", "code"),
    [
        ("gzip_bomb", "RESOURCE_EXHAUSTED"),
        ("black_hole", "DEADLINE_EXCEEDED"),
        # PINGs without end on each connection it accepts while hostile (keepalive sees a
        # lively peer): only dialling again after the failed refresh reaches the sane peer.
        ("ping_storm", "DEADLINE_EXCEEDED"),
    ],
)
async def test_a_hostile_kubelet_is_counted_said_down_once_and_left_behind_when_sane(
    telemetry: SelfTelemetry,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    attack: str,
    code: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="otelgpu.telemetry")
    kubelet = HostileServer(tmp_path / "kubelet.sock", mode=attack, bomb_size=256 * 2**20)
    await kubelet.start()
    config = K8sAttributesProcessorConfig.model_validate(
        {
            "pod_resources_socket": str(kubelet.socket),
            "refresh_interval": "200ms",
            "timeout": "300ms",
            "node_name": "node-a",
        }
    )
    processor = K8sAttributesProcessor(
        make_settings("k8s_attributes", Kind.PROCESSOR, telemetry), config
    )
    await processor.start(FakeHost(telemetry))
    try:
        await wait_for(lambda: (series(telemetry, ERRORS, code=code) or 0) >= 3, timeout=30)
        assert series(telemetry, UP, source="pod_resources") == 0
        down = [r for r in caplog.records if "pod_resources is down" in r.getMessage()]
        assert len(down) == 1, [r.getMessage() for r in down]
        # Sane again (it answers an empty pod list): the source comes back up.
        kubelet.mode = "echo"
        await wait_for(lambda: series(telemetry, UP, source="pod_resources") == 1, timeout=30)
        assert processor.snapshot is not None
    finally:
        await processor.shutdown()
        await kubelet.stop()


async def test_a_kubelet_sending_its_largest_answers_in_one_byte_frames_stays_in_the_bound(
    tmp_path: Path,
) -> None:
    # The largest List the default configuration accepts, one byte per DATA frame: grpcio
    # spends about 16 bytes per byte while it arrives, so the default limit is what bounds a
    # hostile kubelet's cost (stated: 96 MiB, docs/architecture.md "gRPC peers").
    limit = K8sAttributesProcessorConfig().max_receive_message_size
    kubelet = HostileServer(tmp_path / "kubelet.sock", answer_size=limit - 5)
    await kubelet.start()
    try:
        call = await measured_call(kubelet, "tiny_frames", max_receive=limit, timeout=60, calls=3)
    finally:
        await kubelet.stop()
    assert call.outcome == "OK", call
    assert call.growth < 96 * MiB, call
