"""The image, built from the Dockerfile and run the way the DaemonSet runs it.

Real peers: the test dockerd (tests/peers/runtime.py) builds the image on a debootstrap base
(tests/deploy/base_image.py) and runs it with uid 0 and no capabilities, a read-only root
filesystem, no network but loopback, the chart's pipeline ConfigMap mounted as a file, the
kubelet's pod-resources directory (the protocol-faithful FakeKubelet), the host's /proc and
the docker socket, all read-only. The GPUs are the simulated backend: the ConfigMap's
pipeline gets a `simulated:` block and the per-process memory metric (opt-in), nothing else
changes. `/metrics` and `/readyz` are
fetched from inside the container (there is no bridge to reach it from outside).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import otelgpu
from tests.deploy import helm
from tests.deploy import image as agent_image
from tests.peers import kubelet as kubelet_api
from tests.peers.kubelet import FakeKubelet
from tests.peers.runtime import Dockerd, docker_daemon

pytestmark = pytest.mark.integration

GPU0 = "GPU-1mage000-0000-4000-8000-000000000000"  # held by a pod (kubelet)
GPU1 = "GPU-1mage000-0000-4000-8000-000000000001"  # a docker container's process on it
MEMORY_LIMIT = "192Mi"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dockerd, Any]]:
    """The test dockerd with the image built on it (once for this module)."""
    root = tmp_path_factory.mktemp("image")
    try:
        with docker_daemon(root) as dockerd:
            client = dockerd.client()
            base = agent_image.import_base(client)
            built_image, _log = agent_image.build(client, base)
            yield dockerd, built_image
    finally:
        agent_image.unmount_under(root)


def test_image_carries_the_release_version(built: tuple[Dockerd, Any]) -> None:
    dockerd, built_image = built
    assert f"otelgpu:{otelgpu.__version__}" == agent_image.TAG
    labels = built_image.attrs["Config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == otelgpu.__version__
    out = dockerd.client().containers.run(
        agent_image.TAG, ["--version"], remove=True, network_mode="none"
    )
    assert out.decode().strip() == f"otelgpu {otelgpu.__version__}"


def test_image_defaults_to_a_non_root_user(built: tuple[Dockerd, Any]) -> None:
    dockerd, built_image = built
    assert built_image.attrs["Config"]["User"] == "65532:65532"
    out = dockerd.client().containers.run(
        agent_image.TAG,
        ["-c", "import os; print(os.getuid(), os.getgid())"],
        entrypoint=["python3"],
        remove=True,
        network_mode="none",
    )
    assert out.decode().split() == ["65532", "65532"]
    print(f"\nimage {agent_image.TAG}: {built_image.attrs['Size'] / 2**20:.0f} MiB")


def daemonset_pipeline(job_pid: int) -> str:
    """The chart's pipeline ConfigMap (docker runtime), with simulated GPUs added and the
    per-process memory metric on, to see a process mapped to its container."""
    (configmap,) = [
        d
        for d in helm.render({"runtime": "docker"})
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-pipeline")
    ]
    pipeline = yaml.safe_load(configmap["data"]["pipeline.yaml"])
    pipeline["receivers"]["nvml"]["simulated"] = {
        "gpus": [
            {"uuid": GPU0},
            {"uuid": GPU1, "processes": [{"pid": job_pid, "used_memory": "1GiB"}]},
        ]
    }
    pipeline["receivers"]["nvml"]["metrics"] = {
        "nvidia.gpu.process.memory.usage": {"enabled": True}
    }
    pipeline["processors"]["container_env"]["env"] = {"include": ["TEAM"]}
    return yaml.safe_dump(pipeline)


async def _until_ready(container: Any) -> tuple[int, str]:
    deadline = time.monotonic() + 90
    status, body = 0, ""
    while time.monotonic() < deadline:
        container.reload()
        if container.status != "running":
            break
        status, body = await asyncio.to_thread(
            agent_image.http_get, container, "http://127.0.0.1:13133/readyz"
        )
        if status == 200:
            return status, body
        await asyncio.sleep(0.5)
    logs = container.logs().decode(errors="replace")[-4000:]
    raise AssertionError(f"/readyz never 200 (last {status} {body}); agent log:\n{logs}")


async def _until_series(container: Any, *parts: str) -> str:
    """Scrapes /metrics until one sample line holds every part; returns that scrape."""
    deadline = time.monotonic() + 60
    body = ""
    while time.monotonic() < deadline:
        _status, body = await asyncio.to_thread(
            agent_image.http_get, container, "http://127.0.0.1:9400/metrics"
        )
        if any(all(p in line for p in parts) for line in body.splitlines()):
            return body
        await asyncio.sleep(0.5)
    raise AssertionError(f"no sample with all of {parts} in /metrics:\n{body[-4000:]}")


async def test_runs_as_the_daemonset_does_and_serves_metrics(
    built: tuple[Dockerd, Any], tmp_path: Path
) -> None:
    dockerd, _ = built
    client = dockerd.client()
    job = dockerd.run_container("image-test-job", env={"TEAM": "vision", "HOME": "/"})
    kubelet = FakeKubelet()
    kubelet.set_pods(
        kubelet_api.pod(
            "research", "train-a", kubelet_api.container("trainer", {"nvidia.com/gpu": [GPU0]})
        )
    )
    kubelet.set_allocatable({"nvidia.com/gpu": [GPU0, GPU1]})
    container = None
    try:
        await kubelet.start()
        kubelet.socket.chmod(0o660)  # root-only, as the kubelet's: the agent's uid 0 must do
        config = tmp_path / "configmap" / "pipeline.yaml"
        config.parent.mkdir()
        config.write_text(daemonset_pipeline(job.pid))
        container = agent_image.run_like_daemonset(
            client,
            name="otelgpu-agent",
            pipeline=config,
            mounts=[
                agent_image.Mount(kubelet.dir, "/var/lib/kubelet/pod-resources"),
                agent_image.Mount(Path("/proc"), "/host/proc"),
                agent_image.Mount(dockerd.socket, "/var/run/docker.sock"),
            ],
            env={"K8S_NODE_NAME": "image-node", "OTLP_ENDPOINT": "http://127.0.0.1:4317"},
            memory_limit=MEMORY_LIMIT.replace("Mi", "m"),
        )
        _status, body = await _until_ready(container)
        assert '"ready"' in body
        assert (
            await asyncio.to_thread(
                agent_image.http_get, container, "http://127.0.0.1:13133/healthz"
            )
        )[0] == 200
        body = await _until_series(
            container, "hw_gpu_memory_usage_bytes{", f'hw_id="{GPU0}"', 'k8s_pod_name="train-a"'
        )
        # the agent's own metrics on the pipeline's pull reader (values.yaml, telemetry)
        _status, own = await asyncio.to_thread(
            agent_image.http_get, container, "http://127.0.0.1:8888/metrics"
        )
        assert re.search(r'^otelgpu_source_up{[^}]*source="pod_resources"[^}]*} 1', own, re.M)
        assert re.search(r'^otelgpu_source_up{[^}]*source="docker"[^}]*} 1', own, re.M)
        assert not re.search(r"^otelgpu_", body, re.M)
        # The docker container's process on GPU1: pid -> /host/proc -> container -> its env.
        await _until_series(
            container, f'hw_id="{GPU1}"', f'process_pid="{job.pid}"', 'container_env_TEAM="vision"'
        )
        _assert_locked_down(container)
        rss = agent_image.rss_kib(container)
        print(f"\nagent RSS in the container: {rss / 1024:.1f} MiB (limit {MEMORY_LIMIT})")
        assert rss * 1024 < 192 * 2**20
    finally:
        if container is not None:
            container.remove(force=True)
        dockerd.remove_container(job.id)
        await kubelet.close()


def _assert_locked_down(container: Any) -> None:
    """What the pod spec promises, seen from inside the running container."""
    status = container.exec_run(["cat", "/proc/1/status"]).output.decode()
    caps = dict(re.findall(r"^(Cap(?:Eff|Prm|Bnd)):\s+([0-9a-f]+)$", status, re.M))
    assert caps and all(int(v, 16) == 0 for v in caps.values()), caps
    assert re.search(r"^NoNewPrivs:\s+1$", status, re.M)
    for path in ("/opt/otelgpu/probe", "/etc/otelgpu/probe", "/var/lib/kubelet/pod-resources/x"):
        touched = container.exec_run(["touch", path])
        assert touched.exit_code != 0 and b"Read-only file system" in touched.output, path
    assert container.exec_run(["touch", "/tmp/probe"]).exit_code == 0  # the emptyDir stand-in
    links = container.exec_run(["cat", "/proc/net/dev"]).output.decode()
    assert {line.split(":")[0].strip() for line in links.splitlines()[2:]} == {"lo"}
