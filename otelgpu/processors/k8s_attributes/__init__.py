"""`k8s_attributes` processor: which pod and container hold each GPU, from the kubelet."""

from otelgpu.processors.k8s_attributes.factory import factory

__all__ = ["factory"]
