"""Factory, config and core of the `attributes` processor (small enough for one module)."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from otelgpu.component.component import Kind, Settings, Stability, Stateless
from otelgpu.component.registry import Factory
from otelgpu.config.types import StrictModel
from otelgpu.pdata.model import Batch
from otelgpu.processors.actions import AttributeAction, apply_actions


class AttributesProcessorConfig(StrictModel):
    """`processors::attributes`: `actions`, a list of {key, action, value, new_key}.

    Acts on data point attributes (e.g. `nvidia.xid.code`). GPU, pod and runtime labels
    are resource attributes: change those with the `resource` processor.
    """

    actions: list[AttributeAction] = Field(default_factory=list)


class AttributesProcessor(Stateless):
    """Applies the configured actions to every data point's attributes."""

    def __init__(self, settings: Settings, config: AttributesProcessorConfig) -> None:
        self._actions = tuple(config.actions)

    def process(self, batch: Batch) -> Batch:
        if not self._actions:
            return batch
        return tuple(
            replace(
                rm,
                metrics=tuple(
                    replace(
                        m,
                        points=tuple(
                            replace(p, attributes=apply_actions(p.attributes, self._actions))
                            for p in m.points
                        ),
                    )
                    for m in rm.metrics
                ),
            )
            for rm in batch
        )


factory = Factory(
    type="attributes",
    kind=Kind.PROCESSOR,
    stability=Stability.BETA,
    config_type=AttributesProcessorConfig,
    create=AttributesProcessor,
    description="insert, update, upsert, delete or rename data point attributes",
)
