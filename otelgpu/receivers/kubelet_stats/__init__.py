"""`kubelet_stats` receiver: node, pod, container and volume usage from the kubelet's
`/stats/summary` endpoint."""

from otelgpu.receivers.kubelet_stats.factory import factory

__all__ = ["factory"]
