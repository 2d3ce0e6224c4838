"""Kubelet series get container_env's business labels exactly as GPU series do."""

from __future__ import annotations

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.kubelet_stats.metrics import CATALOG
from otelgpu.receivers.kubelet_stats.summary import SummaryReader
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


async def test_enriched_series_keep_the_receivers_identity(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """A pod's series relabelled by container_env (a new env value) replace their
    old label set at once, because their identity is what the receiver read, not their final
    labels."""
    from otelgpu.exporters.prometheus.series import SeriesStore
    from otelgpu.exporters.prometheus.translate import Translator

    runtime = FakeRuntime()
    runtime.sandbox(SID, "ml", "trainer-0")
    runtime.workload(CID, "ml", "trainer-0", "trainer", sandbox_id=SID, env={"TEAM": "ml"})
    processor = make_processor(telemetry, [(runtime, True)], clock, env={"include": ["TEAM"]})
    await processor.start(FakeHost(telemetry))
    reader = SummaryReader(frozenset(s.name for s in CATALOG))
    batch = reader.read(sample_summary(), 1).batch
    assert len({rm.identity for rm in batch}) == len(batch)  # one identity per entity
    store, translator = SeriesStore(), Translator("otel", {})
    translator.ingest(store, processor.process(batch), now=1.0)
    before = store.series_count()
    # The container restarted with another env: a new container, the newest of that name.
    runtime.workload(
        "d" * 64, "ml", "trainer-0", "trainer", sandbox_id=SID, env={"TEAM": "vision"}, created=2.0
    )
    await processor.refresh()
    translator.ingest(store, processor.process(reader.read(sample_summary(), 2).batch), now=2.0)
    await processor.shutdown()
    assert store.series_count() == before  # relabelled in place, no ghost beside it
    text = "".join(p for f in store.families.values() for p in f.series)
    assert 'container_env_TEAM="vision"' in text and 'container_env_TEAM="ml"' not in text
