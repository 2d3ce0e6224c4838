"""Factory of the `container_env` processor."""

from __future__ import annotations

from collections.abc import Sequence

from otelgpu.component import Kind, Settings, Stability
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.containerd import ContainerdRuntime
from otelgpu.processors.container_env.docker import DockerRuntime
from otelgpu.processors.container_env.processor import ContainerEnvProcessor
from otelgpu.processors.container_env.runtime import ContainerRuntime
from otelgpu.registry import Factory


def runtimes_for(config: ContainerEnvProcessorConfig) -> Sequence[tuple[ContainerRuntime, bool]]:
    """The runtime clients `runtime:` asks for, each with whether it is expected (named) or
    only probed (`auto`). Creating a client does no I/O."""
    containerd = ContainerdRuntime(
        config.containerd.socket, config.containerd.namespace, config.timeout
    )
    docker = DockerRuntime(config.docker.socket, config.timeout)
    if config.runtime == "containerd":
        return [(containerd, True)]
    if config.runtime == "docker":
        return [(docker, True)]
    return [(containerd, False), (docker, False)]


def _create(settings: Settings, config: ContainerEnvProcessorConfig) -> ContainerEnvProcessor:
    return ContainerEnvProcessor(settings, config, runtimes_for)


factory = Factory(
    type="container_env",
    kind=Kind.PROCESSOR,
    stability=Stability.ALPHA,
    config_type=ContainerEnvProcessorConfig,
    create=_create,
    description="adds allow-listed env vars, labels and pod labels/annotations from the "
    "container runtime",
)
