"""Factory of the `health_check` extension."""

from __future__ import annotations

from otelgpu.component import Kind, Stability
from otelgpu.extensions.health_check.config import HealthCheckExtensionConfig
from otelgpu.extensions.health_check.extension import HealthCheckExtension
from otelgpu.registry import Factory

factory = Factory(
    type="health_check",
    kind=Kind.EXTENSION,
    stability=Stability.BETA,
    config_type=HealthCheckExtensionConfig,
    create=HealthCheckExtension,
    description="/healthz (alive) and /readyz (pipelines started, every source answered once)",
)
