"""Workload owners from pod labels held by a real containerd (PEERS.md): the CRI sandbox
records the kubelet would write for a Deployment's pod and a CronJob's pod."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.factory import runtimes_for
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.peers.cri_records import Pod, create_container, create_sandbox
from tests.peers.runtime import Containerd
from tests.unit.processors.container_env.helpers import by_id, by_workload, one

pytestmark = pytest.mark.integration


async def _processor(telemetry: SelfTelemetry, socket: Path) -> ContainerEnvProcessor:
    config = ContainerEnvProcessorConfig.model_validate(
        {"runtime": "containerd", "containerd": {"socket": str(socket)}}
    )
    settings = make_settings("container_env", Kind.PROCESSOR, telemetry)
    proc = ContainerEnvProcessor(settings, config, runtimes_for, clock=FakeClock())
    await proc.start(FakeHost(telemetry))
    await proc.refresh()
    return proc


async def test_deployment_and_cronjob_owners_from_the_sandbox_labels(
    containerd: Containerd, telemetry: SelfTelemetry
) -> None:
    serving = Pod("ml", "vllm-6f9c7d8b5-q2w7x", labels={"pod-template-hash": "6f9c7d8b5"})
    nightly = Pod(
        "ml",
        "eval-28948930-k4t8z",
        labels={
            "batch.kubernetes.io/job-name": "eval-28948930",
            "job-name": "eval-28948930",
            "kueue.x-k8s.io/local-queue-name": "research",
        },
    )
    for pod in (serving, nightly):
        create_sandbox(containerd.socket, pod)
    serving_id = create_container(containerd.socket, serving, "server")
    create_container(containerd.socket, nightly, "eval")
    proc = await _processor(telemetry, containerd.socket)
    try:
        by_container = one(proc.process((by_id(serving_id),)))
        assert by_container["k8s.deployment.name"] == "vllm"
        assert by_container["k8s.replicaset.name"] == "vllm-6f9c7d8b5"
        got = one(proc.process((by_workload("ml", nightly.name, "eval"),)))
        owners = {k: v for k, v in got.items() if k.startswith(("k8s.job", "k8s.cron", "kueue"))}
        assert owners == {
            "k8s.job.name": "eval-28948930",
            "k8s.cronjob.name": "eval",
            "kueue.queue.name": "research",
        }
        # No pod label was asked for: none is exported, owners or not.
        assert not any(k.startswith("k8s.pod.label.") for k in got)
    finally:
        await proc.shutdown()
