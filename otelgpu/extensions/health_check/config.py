"""Configuration of the `health_check` extension."""

from __future__ import annotations

from pydantic import field_validator

from otelgpu.config.types import Endpoint, StrictModel


class HealthCheckExtensionConfig(StrictModel):
    """`extensions::health_check`.

    endpoint: where to listen (`0.0.0.0:13133`).
    path: where the Collector's health_check answers (`/`): 200 when ready, 503 when not, with
    the same JSON as `/readyz`. `/healthz` and `/readyz` are answered whatever it is.
    """

    endpoint: Endpoint = "0.0.0.0:13133"
    path: str = "/"

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or "?" in value or any(c.isspace() for c in value):
            raise ValueError(f'expected an absolute path such as "/" or "/health", got "{value}"')
        return value
