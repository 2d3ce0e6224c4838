"""What every built-in factory hands the service: its component, built from its config, and
nothing heavier than its config model until then."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch
from otelgpu.processors.container_env.config import ContainerEnvProcessorConfig
from otelgpu.processors.container_env.factory import runtimes_for
from otelgpu.service.builtins import builtin_registry
from tests.conftest import make_settings
from tests.unit.core.fresh_interpreter import modules_after

# type → the class its factory builds
BUILDS = {
    "debug": "DebugExporter",
    "otlp": "OtlpExporter",
    "otlp_http": "OtlpExporter",
    "prometheus": "PrometheusExporter",
    "health_check": "HealthCheckExtension",
    "attributes": "AttributesProcessor",
    "container_env": "ContainerEnvProcessor",
    "filter": "FilterProcessor",
    "hpc_jobs": "HpcJobsProcessor",
    "k8s_attributes": "K8sAttributesProcessor",
    "resource": "ResourceProcessor",
    "kubelet_stats": "KubeletStatsReceiver",
    "nvml": "NvmlReceiver",
}
# Each component's core, which validating a config must not import (its factory names it for
# type checking only).
CORES = (
    "otelgpu.exporters.debug.exporter",
    "otelgpu.exporters.otlp.exporter",
    "otelgpu.exporters.prometheus.exporter",
    "otelgpu.extensions.health_check.extension",
    "otelgpu.processors.container_env.processor",
    "otelgpu.processors.container_env.runtime",
    "otelgpu.processors.hpc_jobs.processor",
    "otelgpu.processors.k8s_attributes.processor",
    "otelgpu.receivers.kubelet_stats.receiver",
    "otelgpu.receivers.nvml.receiver",
)


async def _drop(batch: Batch) -> None:
    return None


def test_every_factory_builds_its_component_from_its_config() -> None:
    telemetry = SelfTelemetry()
    built = {}
    for factory in builtin_registry():
        config = factory.config_type.model_validate({})
        settings = make_settings(factory.type, factory.kind, telemetry)
        if factory.kind is Kind.RECEIVER:
            component = factory.create(settings, config, _drop)
        else:
            component = factory.create(settings, config)
        built[factory.type] = type(component).__name__
    assert built == BUILDS


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [
        ("containerd", [("ContainerdRuntime", True)]),
        ("docker", [("DockerRuntime", True)]),
        ("auto", [("ContainerdRuntime", False), ("DockerRuntime", False)]),
    ],
)
def test_container_env_asks_the_runtimes_its_config_names(
    runtime: str, expected: list[tuple[str, bool]]
) -> None:
    """A named runtime is expected (its absence is an error); `auto` only probes both."""
    config = ContainerEnvProcessorConfig.model_validate({"runtime": runtime})
    got = [(type(client).__name__, named) for client, named in runtimes_for(config)]
    assert got == expected


def test_validating_every_component_imports_none_of_their_cores(tmp_path: Path) -> None:
    pipeline = {
        "receivers": {"nvml": {"backend": "simulated"}, "kubelet_stats": {}},
        "processors": {
            name: {} for name in ("attributes", "container_env", "filter", "hpc_jobs", "resource")
        }
        | {"k8s_attributes": {}},
        "exporters": {
            "debug": {},
            "otlp": {"endpoint": "127.0.0.1:4317"},
            "otlp_http": {"endpoint": "http://127.0.0.1:4318"},
            "prometheus": {"endpoint": "127.0.0.1:0"},
        },
        "extensions": {"health_check": {"endpoint": "127.0.0.1:0"}},
        "service": {
            "extensions": ["health_check"],
            "pipelines": {
                "metrics": {
                    "receivers": ["nvml", "kubelet_stats"],
                    "processors": [
                        "k8s_attributes",
                        "container_env",
                        "hpc_jobs",
                        "attributes",
                        "resource",
                        "filter",
                    ],
                    "exporters": ["debug", "otlp", "otlp_http", "prometheus"],
                }
            },
        },
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(pipeline))
    modules = modules_after(
        f"from otelgpu.cli import main\nassert main(['validate', '-c', {str(path)!r}]) == 0"
    )
    assert "otelgpu.processors.container_env.config" in modules  # it did read the configs
    assert sorted(set(CORES) & modules) == []
