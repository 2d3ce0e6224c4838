"""A runtime source before its first refresh: not up, no snapshot, no age; only an answer
makes it up."""

from __future__ import annotations

from otelgpu.component.telemetry import SelfTelemetry
from tests.unit.processors.container_env.helpers import counter
from tests.unit.processors.container_env.test_source import Clock, _node, _source, _team


async def test_a_runtime_is_not_up_until_it_has_answered(telemetry: SelfTelemetry) -> None:
    rt = _node()
    source = _source(rt, telemetry, Clock())
    assert not source.up  # nothing asked yet: not up, whatever the runtime would say
    assert source.snapshot is None and source.age() is None
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 0

    await source.refresh()
    assert source.up and _team(source) == "ml"
    assert counter(telemetry, "otelgpu_source_up", source="containerd") == 1
