"""Factory, config and core of the `resource` processor (small enough for one module)."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from otelgpu.component.component import Kind, Settings, Stability, Stateless
from otelgpu.component.registry import Factory
from otelgpu.config.types import StrictModel
from otelgpu.pdata.model import Batch
from otelgpu.processors.actions import AttributeAction, apply_actions


class ResourceProcessorConfig(StrictModel):
    """`processors::resource`: `attributes`, a list of {key, action, value, new_key}.

    Typical use: `{key: k8s.cluster.name, value: prod-eu, action: upsert}`, or renaming a
    runtime label (`container.env.TEAM` → `team`).
    """

    attributes: list[AttributeAction] = Field(default_factory=list)


class ResourceProcessor(Stateless):
    """Applies the configured actions to every resource's attributes."""

    def __init__(self, settings: Settings, config: ResourceProcessorConfig) -> None:
        self._actions = tuple(config.attributes)

    def process(self, batch: Batch) -> Batch:
        if not self._actions:
            return batch
        return tuple(
            replace(rm, resource=apply_actions(rm.resource, self._actions)) for rm in batch
        )


factory = Factory(
    type="resource",
    kind=Kind.PROCESSOR,
    stability=Stability.BETA,
    config_type=ResourceProcessorConfig,
    create=ResourceProcessor,
    description="insert, update, upsert, delete or rename resource attributes",
)
