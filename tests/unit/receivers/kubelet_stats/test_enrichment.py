"""Kubelet series get container_env's business labels exactly as GPU series do."""

from __future__ import annotations

from otelgpu.receivers.kubelet_stats.metrics import CATALOG
from otelgpu.receivers.kubelet_stats.summary import SummaryReader
from otelgpu.telemetry import SelfTelemetry
from tests.fakes import FakeClock, FakeHost
from tests.peers.kubelet_stats_server import sample_summary
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import make_processor

SID, CID = "s" * 64, "c" * 64


async def test_container_env_labels_pod_and_container_series(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    runtime = FakeRuntime()
    runtime.sandbox(SID, "ml", "trainer-0", labels={"team": "vision"})
    runtime.workload(CID, "ml", "trainer-0", "trainer", sandbox_id=SID, env={"TEAM": "ml"})
    processor = make_processor(
        telemetry,
        [(runtime, True)],
        clock,
        env={"include": ["TEAM"]},
        pod_labels={"include": ["team"]},
    )
    await processor.start(FakeHost(telemetry))
    await clock.advance(0)
    batch = SummaryReader(frozenset(s.name for s in CATALOG)).read(sample_summary(), 1).batch
    out = {
        (rm.resource.get("k8s.pod.name"), rm.resource.get("k8s.container.name")): rm.resource
        for rm in processor.process(batch)
        if "k8s.volume.name" not in rm.resource
    }
    await processor.shutdown()
    trainer = out[("trainer-0", "trainer")]
    assert (trainer.get("container.env.TEAM"), trainer.get("k8s.pod.label.team")) == (
        "ml",
        "vision",
    )
    # The sidecar has no runtime record here; the node is nobody's container.
    assert "container.env.TEAM" not in out[("trainer-0", "log-shipper")]
    assert not any(k.startswith("container.env.") for k in out[(None, None)])
