"""Configuration of the `health_check` extension."""

from __future__ import annotations

from otelgpu.config.types import Endpoint, StrictModel


class HealthCheckExtensionConfig(StrictModel):
    """`extensions::health_check`: `endpoint` (`0.0.0.0:13133`)."""

    endpoint: Endpoint = "0.0.0.0:13133"
