"""The components this build of the agent ships, as one explicit list.

Each entry names the module holding the factory; nothing is imported until a configuration
names the type (see `LazyFactory`), so `import otelgpu.cli` stays cheap and a running agent
holds only the components its pipelines use.
"""

from __future__ import annotations

from otelgpu.component.component import Kind
from otelgpu.component.registry import LazyFactory, Registry

_BUILTINS = (
    LazyFactory(Kind.RECEIVER, "nvml", "otelgpu.receivers.nvml.factory"),
    LazyFactory(Kind.RECEIVER, "kubelet_stats", "otelgpu.receivers.kubelet_stats.factory"),
    LazyFactory(Kind.EXPORTER, "debug", "otelgpu.exporters.debug.factory"),
    LazyFactory(Kind.EXPORTER, "otlp", "otelgpu.exporters.otlp.factory"),
    LazyFactory(Kind.EXPORTER, "otlp_http", "otelgpu.exporters.otlp.factory", "http_factory"),
    LazyFactory(Kind.EXPORTER, "prometheus", "otelgpu.exporters.prometheus.factory"),
    LazyFactory(Kind.PROCESSOR, "attributes", "otelgpu.processors.attributes.factory"),
    LazyFactory(Kind.PROCESSOR, "filter", "otelgpu.processors.filter.factory"),
    LazyFactory(Kind.PROCESSOR, "resource", "otelgpu.processors.resource.factory"),
    LazyFactory(Kind.PROCESSOR, "k8s_attributes", "otelgpu.processors.k8s_attributes.factory"),
    LazyFactory(Kind.PROCESSOR, "container_env", "otelgpu.processors.container_env.factory"),
    LazyFactory(Kind.PROCESSOR, "hpc_jobs", "otelgpu.processors.hpc_jobs.factory"),
    LazyFactory(Kind.EXTENSION, "health_check", "otelgpu.extensions.health_check.factory"),
)


def builtin_factories() -> list[LazyFactory]:
    """Every built-in factory, by where it lives (loaded by the registry on first use)."""
    return list(_BUILTINS)


def builtin_registry() -> Registry:
    """The registry the CLI uses."""
    return Registry(builtin_factories())
