"""`nvml` receiver: NVIDIA GPU metrics through NVML (nvidia-ml-py), or simulated GPUs."""

from otelgpu.receivers.nvml.factory import factory

__all__ = ["factory"]
