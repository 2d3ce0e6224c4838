"""container_env against a real dockerd (PEERS.md): running busybox containers, Engine API.

One private dockerd (on its own private containerd) for the module. Covers a plain docker
host (matched by container.id), dockershim-era Kubernetes labels (sandbox `podsandbox`
containers, `annotation.*` labels), S1 with 10k env entries on a real running container,
`runtime: auto` on a docker host, and dockerd going away and coming back.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.factory import runtimes_for
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.peers.runtime import Dockerd, docker_daemon
from tests.unit.processors.container_env.helpers import by_id, by_workload, counter, one

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dockerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dockerd]:
    with docker_daemon(tmp_path_factory.mktemp("docker")) as daemon:
        yield daemon


async def _processor(
    telemetry: SelfTelemetry, dockerd: Dockerd, **options: Any
) -> ContainerEnvProcessor:
    config = ContainerEnvProcessorConfig.model_validate(
        {"runtime": "docker", "docker": {"socket": str(dockerd.socket)}, **options}
    )
    settings = make_settings("container_env", Kind.PROCESSOR, telemetry)
    proc = ContainerEnvProcessor(settings, config, runtimes_for, clock=FakeClock())
    await proc.start(FakeHost(telemetry))
    await proc.refresh()
    return proc


def _name() -> str:
    return "t" + uuid.uuid4().hex[:10]


async def test_plain_docker_host(dockerd: Dockerd, telemetry: SelfTelemetry) -> None:
    box = dockerd.run_container(
        _name(), env={"TEAM": "ml", "PROJECT": "p1"}, labels={"team": "vision", "x": "y"}
    )
    proc = await _processor(
        telemetry, dockerd, env={"include": ["TEAM", "PROJECT"]}, labels={"include": ["team"]}
    )
    resource = one(proc.process((by_id(box.id),)))
    added = {k: v for k, v in resource.items() if k.startswith("container.")}
    assert added == {
        "container.id": box.id,
        "container.env.TEAM": "ml",
        "container.env.PROJECT": "p1",
        "container.label.team": "vision",
    }
    assert "k8s.pod.name" not in resource  # a plain container has no pod to name
    assert counter(telemetry, "otelgpu_source_up", source="docker") == 1
    await proc.shutdown()


async def test_dockershim_pod(dockerd: Dockerd, telemetry: SelfTelemetry) -> None:
    pod = {
        "io.kubernetes.pod.name": "train-d",
        "io.kubernetes.pod.namespace": "ml",
        "io.kubernetes.pod.uid": "uid-d",
    }
    sandbox = dockerd.run_container(
        "k8s_POD_" + _name(),
        labels={
            **pod,
            "io.kubernetes.docker.type": "podsandbox",
            "io.kubernetes.container.name": "POD",
            "team": "vision",
            "annotation.owner": "alice",
        },
    )
    work = dockerd.run_container(
        "k8s_trainer_" + _name(),
        env={"TEAM": "ml"},
        labels={
            **pod,
            "io.kubernetes.docker.type": "container",
            "io.kubernetes.container.name": "trainer",
            "io.kubernetes.sandbox.id": sandbox.id,
        },
    )
    proc = await _processor(
        telemetry,
        dockerd,
        env={"include": ["TEAM"]},
        pod_labels={"include": ["team"]},
        annotations={"include": ["owner"]},
    )
    expected = {
        "container.env.TEAM": "ml",
        "k8s.pod.label.team": "vision",
        "k8s.pod.annotation.owner": "alice",
    }
    assert expected.items() <= one(proc.process((by_workload("ml", "train-d", "trainer"),))).items()
    resource = one(proc.process((by_id(work.id),)))
    assert expected.items() <= resource.items()
    assert (resource["k8s.namespace.name"], resource["k8s.pod.name"]) == ("ml", "train-d")
    pause = by_id(sandbox.id)
    assert proc.process((pause,)) == (pause,)  # the pause container is never a workload
    await proc.shutdown()


async def test_s1_ten_thousand_env_entries_on_a_running_container(
    dockerd: Dockerd, telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """S1: only included keys leave; canary values appear 0 times in output and logs."""
    caplog.set_level(logging.DEBUG)
    rng = random.Random(11)
    canaries = [f"CANARY-{uuid.uuid4().hex}" for _ in range(5)]
    env = {f"R{rng.getrandbits(48):012x}": f"v{rng.getrandbits(32):08x}" for _ in range(10_000)}
    env.update(
        {
            "TEAM": "ml",
            "HF_TOKEN": canaries[0],
            "DB_PASSWORD": canaries[1],
            "AWS_SECRET_ACCESS_KEY": canaries[2],
            "NOT_INCLUDED": canaries[3],
            "SSH_KEY": canaries[4],
        }
    )
    box = dockerd.run_container(_name(), env=env)
    proc = await _processor(
        telemetry, dockerd, env={"include": ["TEAM", "*TOKEN*", "*PASSWORD*", "*SECRET*", "*KEY*"]}
    )
    out = proc.process((by_id(box.id),))
    exported = {k: v for k, v in one(out).items() if k.startswith("container.env.")}
    assert exported == {"container.env.TEAM": "ml"}
    rendered = repr(out) + caplog.text
    assert [c for c in canaries if c in rendered] == []
    assert counter(telemetry, "otelgpu_container_env_refused_keys_total", section="env") == 4
    await proc.shutdown()


async def test_auto_on_a_docker_host(dockerd: Dockerd, telemetry: SelfTelemetry) -> None:
    """dockerd's containerd answers too (its `k8s.io` namespace is empty): both are used."""
    box = dockerd.run_container(_name(), labels={"team": "auto"})
    config = ContainerEnvProcessorConfig.model_validate(
        {
            "runtime": "auto",
            "containerd": {"socket": str(dockerd.containerd.socket)},
            "docker": {"socket": str(dockerd.socket)},
            "labels": {"include": ["team"]},
        }
    )
    settings = make_settings("container_env", Kind.PROCESSOR, telemetry)
    proc = ContainerEnvProcessor(settings, config, runtimes_for, clock=FakeClock())
    await proc.start(FakeHost(telemetry))
    await proc.refresh()
    assert one(proc.process((by_id(box.id),)))["container.label.team"] == "auto"
    assert sorted(telemetry.sources) == ["containerd", "docker"]
    await proc.shutdown()


async def test_dockerd_goes_away_and_comes_back(dockerd: Dockerd, telemetry: SelfTelemetry) -> None:
    """An outage keeps the last good snapshot; the answer after it is the new truth."""
    box = dockerd.run_container(_name(), labels={"team": "before"})
    proc = await _processor(telemetry, dockerd, labels={"include": ["team"]})
    assert one(proc.process((by_id(box.id),)))["container.label.team"] == "before"
    dockerd.stop()  # removes its containers, then stops
    await proc.refresh()
    assert counter(telemetry, "otelgpu_source_up", source="docker") == 0
    # Nobody can tell the container went: the last good snapshot goes on labelling.
    assert one(proc.process((by_id(box.id),)))["container.label.team"] == "before"
    assert counter(telemetry, "otelgpu_enrichment_unmatched_points_total") == 0
    dockerd.start()
    again = dockerd.run_container(_name(), labels={"team": "after"})
    await proc.refresh()
    assert counter(telemetry, "otelgpu_source_up", source="docker") == 1
    assert one(proc.process((by_id(again.id),)))["container.label.team"] == "after"
    rm = by_id(box.id)
    assert proc.process((rm,)) == (rm,)  # docker answered: that container is gone
    await proc.shutdown()


async def test_an_exited_container_labels_nothing(
    dockerd: Dockerd, telemetry: SelfTelemetry
) -> None:
    box = dockerd.run_container(_name(), labels={"team": "alive"})
    proc = await _processor(telemetry, dockerd, labels={"include": ["team"]})
    assert one(proc.process((by_id(box.id),)))["container.label.team"] == "alive"
    dockerd.stop_container(box.id)  # exited; docker keeps the container
    await proc.refresh()
    rm = by_id(box.id)
    assert proc.process((rm,)) == (rm,)
    await proc.shutdown()
