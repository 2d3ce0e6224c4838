"""Factory of the `kubelet_stats` receiver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelgpu.component.component import Kind, MetricsConsumer, Settings, Stability
from otelgpu.component.registry import Factory
from otelgpu.receivers.kubelet_stats.config import KubeletStatsReceiverConfig

if TYPE_CHECKING:
    from otelgpu.receivers.kubelet_stats.receiver import KubeletStatsReceiver


def _create(
    settings: Settings, config: KubeletStatsReceiverConfig, next: MetricsConsumer
) -> KubeletStatsReceiver:
    # Imported here: validating a config needs only the config model, not the HTTP client.
    from otelgpu.receivers.kubelet_stats.receiver import KubeletStatsReceiver

    return KubeletStatsReceiver(settings, config, next)


factory = Factory(
    type="kubelet_stats",
    kind=Kind.RECEIVER,
    stability=Stability.ALPHA,
    config_type=KubeletStatsReceiverConfig,
    create=_create,
    description="Node, pod, container and volume usage from the kubelet's /stats/summary",
)
