"""The components this build of the agent ships, as one explicit list."""

from __future__ import annotations

from otelgpu.registry import Factory, Registry


def builtin_factories() -> list[Factory]:
    """Every built-in factory. Imported lazily so `import otelgpu` stays cheap."""
    from otelgpu.exporters import debug
    from otelgpu.extensions import health_check
    from otelgpu.processors import attributes, filter, resource

    return [
        debug.factory,
        attributes.factory,
        filter.factory,
        resource.factory,
        health_check.factory,
    ]


def builtin_registry() -> Registry:
    """The registry the CLI uses."""
    return Registry(builtin_factories())
