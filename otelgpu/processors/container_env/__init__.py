"""`container_env` processor: business labels from the container runtime (containerd, docker)."""

from otelgpu.processors.container_env.factory import factory

__all__ = ["factory"]
