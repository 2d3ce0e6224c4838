"""Factory of the `k8s_attributes` processor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig

if TYPE_CHECKING:
    from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor


def _create(settings: Settings, config: K8sAttributesProcessorConfig) -> K8sAttributesProcessor:
    # Imported here: validating a config needs only the config model, not the gRPC client.
    from otelgpu.processors.k8s_attributes.processor import K8sAttributesProcessor

    return K8sAttributesProcessor(settings, config)


factory = Factory(
    type="k8s_attributes",
    kind=Kind.PROCESSOR,
    stability=Stability.BETA,
    config_type=K8sAttributesProcessorConfig,
    create=_create,
    description="labels GPU series with the pod and container that hold the GPU",
)
