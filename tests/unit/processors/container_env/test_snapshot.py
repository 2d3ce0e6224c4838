"""Records and snapshots: sandbox joins, CRI and dockershim shapes, caps counted once."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import (
    EVERY_KEY,
    by_id,
    counter,
    make_processor,
    one,
)

ALL = EVERY_KEY


async def _run(telemetry: SelfTelemetry, rt: FakeRuntime, clock: FakeClock, **opts: object):
    proc = make_processor(telemetry, [(rt, True)], clock, **opts)
    await proc.start(FakeHost(telemetry))
    await clock.advance(0)
    return proc


async def test_sandbox_found_by_pod_when_no_sandbox_id(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.sandbox("old", "ml", "p", labels={"team": "old"}, created=1.0)
    rt.sandbox("new", "ml", "p", labels={"team": "new"}, created=2.0)
    rt.sandbox("other", "ml", "q", labels={"team": "q"}, created=3.0)
    rt.workload("w", "ml", "p", "c")
    proc = await _run(telemetry, rt, clock, pod_labels={"include": ["team"]})
    assert one(proc.process((by_id("w"),)))["k8s.pod.label.team"] == "new"
    await proc.shutdown()


async def test_a_match_found_by_name_says_which_container_it_is(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Two live pods of one name (the old one terminating): the name matches the newest pod's
    container, and the match carries that container's ID, which the stale-holder checks read
    its first listing and last absence by."""
    rt = FakeRuntime()
    rt.sandbox("s-old", "ml", "p", uid="old-uid", created=1.0)
    rt.sandbox("s-new", "ml", "p", uid="new-uid", created=2.0)
    rt.workload("w-old", "ml", "p", "c", sandbox_id="s-old", uid="old-uid", created=1.0)
    rt.workload("w-new", "ml", "p", "c", sandbox_id="s-new", uid="new-uid", created=2.0)
    proc = await _run(telemetry, rt, clock)
    snapshot = proc.snapshot
    assert snapshot.by_workload[("ml", "p", "c")].container_id == "w-new"
    assert {cid: m.container_id for cid, m in snapshot.by_id.items()} == {
        "w-old": "w-old",
        "w-new": "w-new",
    }
    await proc.shutdown()


async def test_sandbox_env_is_never_exported(telemetry: SelfTelemetry, clock: FakeClock) -> None:
    rt = FakeRuntime()
    rt.sandbox("s", "ml", "p")  # carries PAUSE_ENV
    rt.workload("w", "ml", "p", "c", env={"TEAM": "ml"}, sandbox_id="s")
    proc = await _run(telemetry, rt, clock, env=ALL)
    resource = one(proc.process((by_id("w"),)))
    assert resource["container.env.TEAM"] == "ml"
    assert "container.env.PAUSE_ENV" not in resource
    await proc.shutdown()


async def test_dockershim_shape(telemetry: SelfTelemetry, clock: FakeClock) -> None:
    rt = FakeRuntime("docker")
    rt.add(
        "s",
        {
            "io.kubernetes.docker.type": "podsandbox",
            "io.kubernetes.pod.namespace": "ml",
            "io.kubernetes.pod.name": "p",
            "team": "vision",
        },
    )
    rt.add(
        "w",
        {
            "io.kubernetes.docker.type": "container",
            "io.kubernetes.pod.namespace": "ml",
            "io.kubernetes.pod.name": "p",
            "io.kubernetes.container.name": "c",
            "io.kubernetes.sandbox.id": "s",
        },
        env={"TEAM": "ml"},
    )
    proc = await _run(telemetry, rt, clock, env=ALL, pod_labels={"include": ["team"]})
    resource = one(proc.process((by_id("w"),)))
    assert resource["k8s.pod.label.team"] == "vision"
    assert resource["k8s.container.name"] == "c"
    assert proc.process((by_id("s"),))[0].resource.get("k8s.pod.label.team") is None
    await proc.shutdown()


async def test_plain_docker_container_matches_by_id_only(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime("docker")
    rt.add("plain", {"team": "a"}, env={"TEAM": "a"})
    proc = await _run(telemetry, rt, clock, env=ALL, labels=ALL)
    resource = one(proc.process((by_id("plain"),)))
    assert resource["container.label.team"] == "a" and resource["container.env.TEAM"] == "a"
    assert "k8s.pod.name" not in resource
    await proc.shutdown()


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


async def test_attribute_cap_counted_once_per_container(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.sandbox("s", "ml", "p")
    rt.workload("w", "ml", "p", "c", env={f"E{i:02}": "v" for i in range(40)})
    proc = await _run(telemetry, rt, clock, env=ALL, max_attributes=32, refresh_interval="1s")
    added = [k for k in one(proc.process((by_id("w"),))) if k.startswith("container.env.")]
    assert added == [f"container.env.E{i:02}" for i in range(32)]
    await clock.advance(3.0)  # three more refreshes of the unchanged container
    assert counter(telemetry, "otelgpu_container_env_dropped_attributes_total") == 8
    await proc.shutdown()


async def test_the_pods_owners_and_uid_are_not_counted_in_the_attribute_cap(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.sandbox("s", "ml", "train-7d9f8-x2x7k", uid="u1", labels={"pod-template-hash": "7d9f8"})
    rt.workload(
        "w", "ml", "train-7d9f8-x2x7k", "c", sandbox_id="s", env={"A": "1", "B": "2", "C": "3"}
    )
    proc = await _run(telemetry, rt, clock, env=ALL, max_attributes=2)
    resource = one(proc.process((by_id("w"),)))
    assert [k for k in resource if k.startswith("container.env.")] == [
        "container.env.A",
        "container.env.B",
    ]
    assert resource["k8s.deployment.name"] == "train" and resource["k8s.pod.uid"] == "u1"
    await proc.shutdown()


async def test_the_newest_ready_sandbox_of_a_pod_wins_whatever_the_listing_order(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """Half a second apart, the newer listed first: the kubelet's replacement sandbox of the
    same pod (same UID) labels the pod's container, not the one it replaced."""
    rt = FakeRuntime()
    rt.sandbox("s-new", "ml", "p", uid="u1", labels={"team": "new"}, created=1.5)
    rt.sandbox("s-old", "ml", "p", uid="u1", labels={"team": "old"}, created=1.0)
    rt.workload("w", "ml", "p", "c", uid="u1")
    proc = await _run(telemetry, rt, clock, pod_labels={"include": ["team"]})
    assert one(proc.process((by_id("w"),)))["k8s.pod.label.team"] == "new"
    await proc.shutdown()


async def test_a_sandbox_that_names_no_uid_is_its_pods_for_a_container_that_does(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.sandbox("s", "ml", "p", labels={"team": "vision"})  # no uid label
    rt.workload("w", "ml", "p", "c", uid="u1")
    proc = await _run(telemetry, rt, clock, pod_labels={"include": ["team"]})
    assert one(proc.process((by_id("w"),)))["k8s.pod.label.team"] == "vision"
    await proc.shutdown()


async def test_value_cap_and_refusals_counted_once_and_logged_by_name(
    telemetry: SelfTelemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    rt = FakeRuntime()
    rt.sandbox("sp", "ml", "p")
    rt.sandbox("sq", "ml", "q")
    rt.workload("w1", "ml", "p", "c", env={"LONG": "x" * 300, "HF_TOKEN": "canary-hf-1"})
    rt.workload("w2", "ml", "q", "c", env={"HF_TOKEN": "canary-hf-2"})
    # LONG is named: a glob alone would refuse a value over 64 characters (glob_long_value).
    env = {"include": ["LONG", *EVERY_KEY["include"]]}
    proc = await _run(telemetry, rt, clock, env=env, refresh_interval="1s")
    await clock.advance(2.0)
    assert len(one(proc.process((by_id("w1"),)))["container.env.LONG"]) == 256  # type: ignore[arg-type]
    assert counter(telemetry, "otelgpu_container_env_truncated_values_total") == 1
    assert counter(telemetry, "otelgpu_container_env_refused_keys_total", section="env") == 2
    assert caplog.text.count("'HF_TOKEN'") == 1
    assert "canary" not in caplog.text
    await proc.shutdown()


async def test_malformed_spec_is_counted_and_survived(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.add("bad", {"io.cri-containerd.kind": "container", "team": "a"}, raw_spec=b"{not json")
    rt.add("odd", {"team": "b"}, raw_spec=b'{"process": {"env": [1, "TEAM=b"]}}')
    proc = await _run(telemetry, rt, clock, env=ALL, labels=ALL)
    out = proc.process((by_id("bad"), by_id("odd")))
    assert out[0].resource["container.label.team"] == "a"
    assert out[1].resource["container.env.TEAM"] == "b"
    invalid = "otelgpu_container_env_invalid_records_total"
    assert counter(telemetry, invalid, runtime="containerd", reason="malformed_spec") == 2
    await proc.shutdown()


async def test_unchanged_containers_are_not_read_again(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.sandbox("s", "ml", "p")
    rt.workload("w", "ml", "p", "c", env={"TEAM": "a"})
    proc = await _run(telemetry, rt, clock, env=ALL, refresh_interval="1s")
    await clock.advance(3.0)
    assert rt.list_calls == 4 and rt.spec_calls == 2  # the container and its sandbox
    rt.add("w", {"io.cri-containerd.kind": "container"}, env={"TEAM": "b"}, revision="2")
    await clock.advance(1.0)
    assert rt.spec_calls == 3
    assert one(proc.process((by_id("w"),)))["container.env.TEAM"] == "b"
    assert counter(telemetry, "otelgpu_container_env_containers", runtime="containerd") == 1
    await proc.shutdown()


async def test_the_pod_uid_comes_from_the_sandbox(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    """The kubelet's pod-resources answer names no pod UID; the runtime's sandbox record does
    (the prometheus exporter's `dcgm_labels.pod_uid` renders it as dcgm-exporter's `pod_uid`)."""
    rt = FakeRuntime()
    rt.sandbox("s", "ml", "p", uid="9f1c-uid")
    rt.workload("w", "ml", "p", "c", sandbox_id="s")
    rt.add("plain", {})  # a container of no pod: no UID
    proc = await _run(telemetry, rt, clock)
    assert one(proc.process((by_id("w"),)))["k8s.pod.uid"] == "9f1c-uid"
    assert "k8s.pod.uid" not in one(proc.process((by_id("plain"),)))
    await proc.shutdown()
