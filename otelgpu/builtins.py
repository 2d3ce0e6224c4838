"""The components this build of the agent ships, as one explicit list."""

from __future__ import annotations

from otelgpu.registry import Factory, Registry


def builtin_factories() -> list[Factory]:
    """Every built-in factory. Imported lazily so `import otelgpu` stays cheap."""
    from otelgpu.exporters import debug, otlp, prometheus
    from otelgpu.extensions import health_check
    from otelgpu.processors import attributes, container_env, filter, k8s_attributes, resource
    from otelgpu.receivers import kubelet_stats, nvml

    return [
        nvml.factory,
        kubelet_stats.factory,
        debug.factory,
        otlp.factory,
        otlp.http_factory,
        prometheus.factory,
        attributes.factory,
        filter.factory,
        resource.factory,
        k8s_attributes.factory,
        container_env.factory,
        __import__("otelgpu.processors.hpc_jobs", fromlist=["factory"]).factory,
        health_check.factory,
    ]


def builtin_registry() -> Registry:
    """The registry the CLI uses."""
    return Registry(builtin_factories())
