"""Records read from each runtime marker on its own: a sandbox known by containerd's kind
label or by the CRI spec annotation alone, a workload named only by its CRI spec annotations,
and a dockershim container tied to the sandbox its label names; and each section's refusals
counted under that section."""

from __future__ import annotations

import logging

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.container_env.audit import REFUSED, Audit
from otelgpu.processors.container_env.records import Selectors, extract
from otelgpu.processors.container_env.runtime import ContainerRef, ContainerSpec
from tests.fakes import FakeClock
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import by_id, by_workload, counter, one
from tests.unit.processors.container_env.test_snapshot import ALL, _run
from tests.unit.processors.container_env.test_source import _selector as _section_selector

TEAM = {"include": ["team"]}


def _listed(id: str, labels: dict[str, str]) -> ContainerRef:
    """A running container as a runtime lists it."""
    return ContainerRef(id=id, labels=labels, revision="1", running=True, created=0.0)


def test_a_selector_keeps_its_section_and_refusals_are_counted_under_it() -> None:
    selectors = Selectors(
        env=_section_selector("env", "HF_TOKEN"),
        labels=_section_selector("labels", "team"),
        pod_labels=_section_selector("pod_labels", "api_token"),
        annotations=_section_selector("annotations", "example.com/owner"),
        owners=True,
    )
    assert [s.section for s in (selectors.env, selectors.pod_labels)] == ["env", "pod_labels"]
    telemetry = SelfTelemetry()
    audit = Audit("container_env", telemetry, logging.getLogger("test.keys"))
    sandbox = _listed("s", {"io.cri-containerd.kind": "sandbox", "api_token": "t"})
    workload = _listed("w", {"io.cri-containerd.kind": "container"})
    extract(sandbox, ContainerSpec(), selectors, audit)
    extract(workload, ContainerSpec(env=("HF_TOKEN=hf_x",)), selectors, audit)
    assert counter(telemetry, REFUSED, section="pod_labels", reason="secret_key") == 1
    assert counter(telemetry, REFUSED, section="env", reason="secret_key") == 1
    assert counter(telemetry, REFUSED) == 2


def _selectors() -> Selectors:
    return Selectors(
        env=_section_selector("env"),
        labels=_section_selector("labels"),
        pod_labels=_section_selector("pod_labels"),
        annotations=_section_selector("annotations"),
        owners=True,
    )


def test_a_workload_record_is_tied_to_the_sandbox_its_cri_annotation_names() -> None:
    """Where the runtime lists no sandbox, the CRI spec annotation ties the container to its
    pod's sandbox, not to any sandbox of the same pod name (a replaced one may remain)."""
    audit = Audit("container_env", SelfTelemetry(), logging.getLogger("test.keys"))
    workload = _listed("w", {"io.cri-containerd.kind": "container"})
    spec = ContainerSpec(annotations={"io.kubernetes.cri.sandbox-id": "s-new"})
    assert extract(workload, spec, _selectors(), audit).sandbox_id == "s-new"


def test_a_sandbox_record_is_no_container_and_a_workload_record_has_no_owners() -> None:
    """A sandbox stands for its pod (its owners are the pod's); a workload container names
    itself and takes its pod's owners from the sandbox, never its own labels; a missing UID
    label is an empty UID."""
    audit = Audit("container_env", SelfTelemetry(), logging.getLogger("test.keys"))
    pod = {
        "io.kubernetes.pod.namespace": "ml",
        "io.kubernetes.pod.name": "train-7d9f8-x2x7k",
        "io.kubernetes.container.name": "pause",
        "pod-template-hash": "7d9f8",
    }
    sandbox = _listed("s", {**pod, "io.cri-containerd.kind": "sandbox"})
    workload = _listed("w", {**pod, "io.cri-containerd.kind": "container"})
    pod_record = extract(sandbox, ContainerSpec(), _selectors(), audit)
    container_record = extract(workload, ContainerSpec(), _selectors(), audit)
    assert (pod_record.container, pod_record.pod_uid) == ("", "")
    assert pod_record.owners["k8s.deployment.name"] == "train"
    assert container_record.container == "pause" and container_record.owners == {}


async def test_a_sandbox_with_a_malformed_spec_is_known_by_its_containerd_kind_label(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.add(
        "s",
        {
            "io.cri-containerd.kind": "sandbox",
            "io.kubernetes.pod.namespace": "ml",
            "io.kubernetes.pod.name": "p",
            "team": "vision",
        },
        raw_spec=b"{not json",  # no spec annotation to say what it is
    )
    rt.workload("w", "ml", "p", "c", sandbox_id="s")
    proc = await _run(telemetry, rt, clock, pod_labels=TEAM)
    assert one(proc.process((by_id("w"),)))["k8s.pod.label.team"] == "vision"
    await proc.shutdown()


async def test_a_sandbox_is_known_by_its_cri_container_type_annotation_alone(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.add(
        "s",
        {"io.kubernetes.pod.namespace": "ml", "io.kubernetes.pod.name": "p", "team": "vision"},
        annotations={"io.kubernetes.cri.container-type": "sandbox"},
    )
    rt.workload("w", "ml", "p", "c", sandbox_id="s")
    proc = await _run(telemetry, rt, clock, pod_labels=TEAM)
    assert one(proc.process((by_id("w"),)))["k8s.pod.label.team"] == "vision"
    await proc.shutdown()


async def test_a_containerd_workload_is_named_by_its_cri_spec_annotations(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime()
    rt.sandbox("s", "ml", "p", labels={"team": "vision"})
    rt.add(  # the kubelet's labels missing: only containerd's own kind label
        "w",
        {"io.cri-containerd.kind": "container"},
        env={"TEAM": "ml"},
        annotations={
            "io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.sandbox-id": "s",
            "io.kubernetes.cri.sandbox-name": "p",
            "io.kubernetes.cri.sandbox-namespace": "ml",
            "io.kubernetes.cri.container-name": "c",
        },
    )
    proc = await _run(telemetry, rt, clock, env=ALL, pod_labels=TEAM)
    resource = one(proc.process((by_id("w"),)))
    assert resource["k8s.container.name"] == "c"
    assert resource["k8s.pod.name"] == "p" and resource["k8s.namespace.name"] == "ml"
    matched = one(proc.process((by_workload("ml", "p", "c"),)))
    assert matched["container.env.TEAM"] == "ml"
    assert matched["k8s.pod.label.team"] == "vision"
    await proc.shutdown()


def _dockershim(rt: FakeRuntime, id: str, kind: str, created: float, **labels: str) -> None:
    rt.add(
        id,
        {
            "io.kubernetes.docker.type": kind,
            "io.kubernetes.pod.namespace": "ml",
            "io.kubernetes.pod.name": "p",
            "io.kubernetes.pod.uid": "u1",
            **labels,
        },
        env={"TEAM": id},
        created=created,
    )


async def test_a_dockershim_container_of_a_replaced_sandbox_labels_nothing(
    telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    rt = FakeRuntime("docker")
    _dockershim(rt, "s-old", "podsandbox", 1.0, team="old")
    _dockershim(rt, "s-new", "podsandbox", 2.0, team="new")
    sandbox_id = "io.kubernetes.sandbox.id"
    container = {"io.kubernetes.container.name": "c"}
    _dockershim(rt, "w-old", "container", 1.5, **container, **{sandbox_id: "s-old"})
    _dockershim(rt, "w-new", "container", 2.5, **container, **{sandbox_id: "s-new"})
    proc = await _run(telemetry, rt, clock, env=ALL, pod_labels=TEAM)
    fresh = one(proc.process((by_id("w-new"),)))
    assert fresh["k8s.pod.label.team"] == "new" and fresh["container.env.TEAM"] == "w-new"
    left_behind = one(proc.process((by_id("w-old"),)))
    assert "k8s.pod.label.team" not in left_behind
    assert "container.env.TEAM" not in left_behind
    await proc.shutdown()
