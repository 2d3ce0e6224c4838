"""Factory of the `container_env` processor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig

if TYPE_CHECKING:
    from otelgpu.processors.container_env.processor import ContainerEnvProcessor
    from otelgpu.processors.container_env.runtime import ContainerRuntime


def runtimes_for(config: ContainerEnvProcessorConfig) -> Sequence[tuple[ContainerRuntime, bool]]:
    """The runtime clients `runtime:` asks for, each with whether it is expected (named) or
    only probed (`auto`). Creating a client does no I/O; each client's module (grpc for
    containerd) is imported only when `runtime:` asks for it."""
    out: list[tuple[ContainerRuntime, bool]] = []
    if config.runtime in ("containerd", "auto"):
        from otelgpu.processors.container_env.containerd import ContainerdRuntime

        containerd = ContainerdRuntime(
            config.containerd.socket, config.containerd.namespace, config.timeout
        )
        out.append((containerd, config.runtime == "containerd"))
    if config.runtime in ("docker", "auto"):
        from otelgpu.processors.container_env.docker import DockerRuntime

        docker = DockerRuntime(config.docker.socket, config.timeout)
        out.append((docker, config.runtime == "docker"))
    return out


def _create(settings: Settings, config: ContainerEnvProcessorConfig) -> ContainerEnvProcessor:
    # Imported here: validating a config needs only the config model.
    from otelgpu.processors.container_env.processor import ContainerEnvProcessor

    return ContainerEnvProcessor(settings, config, runtimes_for)


factory = Factory(
    type="container_env",
    kind=Kind.PROCESSOR,
    stability=Stability.BETA,
    config_type=ContainerEnvProcessorConfig,
    create=_create,
    description="adds allow-listed env vars, labels and pod labels/annotations from the "
    "container runtime",
)
