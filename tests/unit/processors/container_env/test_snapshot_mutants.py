"""Containers that half-name a pod: a namespace label without a pod name, or a pod name
without a namespace, is no pod, so such a container needs no sandbox and matches by its ID
like any plain docker container."""

from __future__ import annotations

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from tests.fakes import FakeClock
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import by_id, one
from tests.unit.processors.container_env.test_snapshot import ALL, _run


@pytest.mark.parametrize(
    ("label", "identity"),
    [
        ("io.kubernetes.pod.namespace", "k8s.namespace.name"),
        ("io.kubernetes.pod.name", "k8s.pod.name"),
    ],
)
async def test_a_container_naming_only_half_a_pod_matches_by_id_without_a_sandbox(
    telemetry: SelfTelemetry, clock: FakeClock, label: str, identity: str
) -> None:
    rt = FakeRuntime("docker")
    rt.add("half", {label: "ml", "team": "a"}, env={"TEAM": "a"})
    proc = await _run(telemetry, rt, clock, env=ALL, labels={"include": ["team"]})
    resource = one(proc.process((by_id("half"),)))
    assert resource["container.env.TEAM"] == "a"
    assert resource["container.label.team"] == "a"
    assert resource[identity] == "ml"
    await proc.shutdown()
