"""Factory of the `health_check` extension."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.extensions.health_check.config import HealthCheckExtensionConfig

if TYPE_CHECKING:
    from otelgpu.extensions.health_check.extension import HealthCheckExtension


def _create(settings: Settings, config: HealthCheckExtensionConfig) -> HealthCheckExtension:
    # Imported here: validating a config needs only the config model, not the HTTP server.
    from otelgpu.extensions.health_check.extension import HealthCheckExtension

    return HealthCheckExtension(settings, config)


factory = Factory(
    type="health_check",
    kind=Kind.EXTENSION,
    stability=Stability.BETA,
    config_type=HealthCheckExtensionConfig,
    create=_create,
    description="/healthz (alive) and /readyz (pipelines started, every source answered once)",
)
