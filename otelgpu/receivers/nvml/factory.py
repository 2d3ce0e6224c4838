"""Factory of the `nvml` receiver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, MetricsConsumer, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.dcgm_names import NAMING

if TYPE_CHECKING:
    from otelgpu.receivers.nvml.receiver import NvmlReceiver


def _create(settings: Settings, config: NvmlReceiverConfig, next: MetricsConsumer) -> NvmlReceiver:
    # Imported here: validating a config needs only the config model.
    from otelgpu.receivers.nvml.receiver import NvmlReceiver

    return NvmlReceiver(settings, config, next)


factory = Factory(
    type="nvml",
    kind=Kind.RECEIVER,
    stability=Stability.BETA,
    config_type=NvmlReceiverConfig,
    create=_create,
    description="NVIDIA GPU metrics through NVML (or simulated GPUs)",
    naming=NAMING,
)
