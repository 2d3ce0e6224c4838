"""k8s_attributes notes times that container_env compares with its own (`pdata/notes.py`): both
read time off the clock their Settings hand them, and the service hands every component the
agent's one clock (`AGENT_CLOCK`)."""

from __future__ import annotations

import random
from dataclasses import replace

from otelgpu.component.clock import AGENT_CLOCK
from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.pdata import notes
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor
from otelgpu.service.builtins import builtin_registry
from otelgpu.service.graph import build
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import by_workload, config
from tests.unit.processors.k8s_attributes.fakes import (
    GPU,
    UUID_A,
    FakePodResources,
    container,
    gpu,
    pod,
)

PIPELINE = """
receivers:
  nvml: {backend: simulated, simulated: {gpus: 1}}
  kubelet_stats: {endpoint: "127.0.0.1:10255", read_only_port: true}
processors:
  k8s_attributes: {}
  container_env: {}
exporters:
  debug: {}
service:
  pipelines:
    metrics/node:
      receivers: [nvml, kubelet_stats]
      processors: [k8s_attributes, container_env]
      exporters: [debug]
"""


def test_the_service_hands_every_component_the_agent_clock() -> None:
    registry = builtin_registry()
    graph = build(validate(load([("p.yaml", PIPELINE)]), registry), registry, SelfTelemetry())
    components = [*graph.receivers.values(), *graph.processors.values()]
    assert len(components) == 4
    assert all(c._settings.clock is AGENT_CLOCK for c in components)  # as each was handed


async def test_k8s_attributes_notes_times_off_its_settings_clock(
    telemetry: SelfTelemetry,
) -> None:
    clock = FakeClock(start=500.0)
    settings = replace(make_settings("k8s_attributes", Kind.PROCESSOR, telemetry), clock=clock)
    client = FakePodResources()
    client.set(pod("ml", "train-0", container("trainer", {GPU: [UUID_A]})))
    k8s = K8sAttributesProcessor(
        settings,
        K8sAttributesProcessorConfig(),
        client=client,
        environ={},
        rng=random.Random(7),
    )
    await k8s.start(FakeHost(telemetry))
    await clock.advance(3)
    (labelled, *_) = k8s.process((gpu(UUID_A),))
    assert labelled.notes is not None
    assert labelled.notes[notes.HOLDERS_CONFIRMED] == 500.0  # the fake clock's, not the host's
    await k8s.shutdown()


async def test_container_env_compares_noted_times_with_its_settings_clock(
    telemetry: SelfTelemetry,
) -> None:
    """A holder listed since after the runtime listing began (on the same clock) waits for the
    next listing; one listed since before is matched."""
    clock = FakeClock(start=500.0)
    settings = replace(make_settings("container_env", Kind.PROCESSOR, telemetry), clock=clock)
    runtime = FakeRuntime()
    runtime.sandbox("s", "ml", "train-0")
    runtime.workload("w", "ml", "train-0", "trainer", sandbox_id="s", env={"TEAM": "ml"})
    team = config(env={"include": ["TEAM"]})
    env = ContainerEnvProcessor(settings, team, lambda _: [(runtime, True)])
    await env.start(FakeHost(telemetry))
    await clock.advance(0)

    def held_since(when: float) -> ResourceMetrics:
        return replace(by_workload("ml", "train-0", "trainer"), notes={notes.HOLDER_SINCE: when})

    before, after = env.process((held_since(499.0), held_since(501.0)))
    assert before.resource["container.env.TEAM"] == "ml"
    assert "container.env.TEAM" not in after.resource  # newer than the listing: it waits
    await env.shutdown()
