"""otelgpu: an OpenTelemetry-Collector-style GPU metrics agent for Kubernetes nodes."""

__version__ = "0.2.0"
