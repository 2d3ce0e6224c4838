"""Component IDs and the explicit registry (lazy: a component is imported when first named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.registry import LazyFactory, Registry
from otelgpu.exporters import debug
from otelgpu.service.builtins import builtin_factories, builtin_registry
from tests.unit.core.fresh_interpreter import modules_after


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nvml", ComponentID("nvml")),
        ("nvml/gpu0", ComponentID("nvml", "gpu0")),
        ("k8s_attributes/a.b-c", ComponentID("k8s_attributes", "a.b-c")),
    ],
)
def test_component_id_parses_and_prints(text: str, expected: ComponentID) -> None:
    assert ComponentID.parse(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize("bad", ["", "/x", "9x", "a-b", "a/", "a/b/c", "a/b c", "x" * 64])
def test_component_id_refuses_bad_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid component id"):
        ComponentID.parse(bad)


def test_registry_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match='duplicate exporter factory "debug"'):
        Registry([debug.factory, debug.factory])


def test_unknown_type_names_the_valid_ones() -> None:
    registry = Registry([debug.factory])
    with pytest.raises(KeyError, match=r'unknown exporter type "debgu" \(valid: debug\)'):
        registry.get(Kind.EXPORTER, "debgu")
    with pytest.raises(KeyError, match=r'unknown receiver type "nvml" \(valid: none\)'):
        registry.get(Kind.RECEIVER, "nvml")


def test_builtins_are_unique_and_typed_by_convention() -> None:
    registry = builtin_registry()
    assert len(registry) == len(builtin_factories())
    for factory in registry:
        ComponentID.parse(factory.type)  # the collector's type rule
        assert factory.type == factory.type.lower()
        assert factory.config_type.model_config.get("extra") == "forbid", factory.type
        assert factory.config_type.__name__.endswith(f"{factory.kind.value.capitalize()}Config"), (
            factory.type
        )
        factory.config_type()  # the defaults alone are a valid config


def test_unknown_builtin_type_names_every_valid_one_without_importing() -> None:
    registry = builtin_registry()
    with pytest.raises(KeyError) as exc:
        registry.get(Kind.EXPORTER, "prometheos")
    assert exc.value.args[0] == (
        'unknown exporter type "prometheos" (valid: debug, otlp, otlp_http, prometheus)'
    )


def test_a_lazy_entry_must_name_the_factory_it_claims() -> None:
    wrong = LazyFactory(Kind.EXPORTER, "otlp", "otelgpu.exporters.debug.factory")
    with pytest.raises(
        TypeError,
        match=r'otelgpu.exporters.debug.factory.factory is not the exporter factory "otlp"',
    ):
        Registry([wrong]).get(Kind.EXPORTER, "otlp")
    assert Registry([wrong]).types(Kind.EXPORTER) == ["otlp"]  # listing types loads nothing


def test_a_lazy_entry_is_loaded_once_and_then_kept() -> None:
    registry = Registry([LazyFactory(Kind.EXPORTER, "debug", "otelgpu.exporters.debug.factory")])
    assert registry.loaded() == []
    assert registry.get(Kind.EXPORTER, "debug") is debug.factory
    assert registry.loaded() == [(Kind.EXPORTER, "debug")]
    assert [f.type for f in registry] == ["debug"]


def _components(modules: set[str]) -> set[str]:
    """The component packages (`otelgpu.<kind>s.<type>`) among `modules`."""
    kinds = (
        "otelgpu.receivers.",
        "otelgpu.processors.",
        "otelgpu.exporters.",
        "otelgpu.extensions.",
    )
    return {".".join(m.split(".")[:3]) for m in modules if m.startswith(kinds)} - {
        "otelgpu.processors.actions"
    }


def test_the_cli_and_the_builtin_registry_import_no_component() -> None:
    modules = modules_after(
        "import otelgpu.cli\n"
        "from otelgpu.service.builtins import builtin_registry\n"
        "from otelgpu.component.component import Kind\n"
        "r = builtin_registry()\n"
        "assert r.types(Kind.RECEIVER) == ['kubelet_stats', 'nvml']"
    )
    assert _components(modules) == set()
    assert {"aiohttp", "grpc", "docker", "bcrypt"} & modules == set()


def test_validate_imports_only_the_named_components_configs(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        "receivers: {nvml: {backend: simulated}}\n"
        "exporters: {prometheus: {endpoint: '127.0.0.1:0'}}\n"
        "service: {pipelines: {metrics: {receivers: [nvml], exporters: [prometheus]}}}\n"
    )
    modules = modules_after(
        f"from otelgpu.cli import main\nassert main(['validate', '-c', {str(pipeline)!r}]) == 0"
    )
    assert _components(modules) == {"otelgpu.receivers.nvml", "otelgpu.exporters.prometheus"}
    # Validation needs the config models only: no HTTP server, no receiver core.
    assert {"aiohttp", "grpc", "otelgpu.exporters.prometheus.exporter"} & modules == set()
    assert "otelgpu.receivers.nvml.receiver" not in modules


def test_an_otlp_grpc_exporter_does_not_load_the_http_client_nor_docker() -> None:
    modules = modules_after(
        "from otelgpu.service.builtins import builtin_registry\n"
        "from otelgpu.component.component import Kind\n"
        "from otelgpu.processors.container_env.factory import runtimes_for\n"
        "r = builtin_registry()\n"
        "f = r.get(Kind.EXPORTER, 'otlp')\n"
        "from otelgpu.component.component import ComponentID, Settings\n"
        "from otelgpu.component.telemetry import SelfTelemetry\n"
        "s = Settings.for_component(ComponentID('otlp'), Kind.EXPORTER, SelfTelemetry())\n"
        "f.create(s, f.config_type.model_validate({'endpoint': '127.0.0.1:4317'}))\n"
        "c = r.get(Kind.PROCESSOR, 'container_env')\n"
        "runtimes_for(c.config_type.model_validate({'runtime': 'containerd'}))"
    )
    assert "otelgpu.exporters.otlp.grpc_client" in modules
    assert "otelgpu.processors.container_env.containerd" in modules
    assert {"aiohttp", "otelgpu.exporters.otlp.http_client"} & modules == set()
    assert "otelgpu.processors.container_env.docker" not in modules


def test_bcrypt_is_loaded_only_by_a_prometheus_exporter_with_basic_auth() -> None:
    """bcrypt's library is 0.4 MiB resident: an exporter without basic auth never loads it;
    one with basic auth loads it as its checker prepares (at start)."""
    make = (
        "import asyncio\n"
        "from otelgpu.service.builtins import builtin_registry\n"
        "from otelgpu.component.component import ComponentID, Kind, Settings\n"
        "from otelgpu.component.telemetry import SelfTelemetry\n"
        "f = builtin_registry().get(Kind.EXPORTER, 'prometheus')\n"
        "s = Settings.for_component(ComponentID('prometheus'), Kind.EXPORTER, SelfTelemetry())\n"
        "f.create(s, f.config_type.model_validate({'endpoint': '127.0.0.1:0'}))\n"
    )
    without = modules_after(make)
    assert "otelgpu.exporters.prometheus.exporter" in without
    assert "bcrypt" not in without
    password_hash = "$2b$04$" + "a" * 53
    with_auth = modules_after(
        make + "from otelgpu.exporters.prometheus.auth import BasicAuthenticator\n"
        "from otelgpu.exporters.prometheus.config import BasicAuthConfig\n"
        f"c = BasicAuthConfig(username='prom', password_hash={password_hash!r})\n"
        "checker = BasicAuthenticator(c)\n"
        "asyncio.run(checker.prepare())\n"
        "checker.close()"
    )
    assert "bcrypt" in with_auth


def test_the_grpc_peers_are_reached_through_grpcio_only() -> None:
    # Every gRPC peer of the agent goes through otelgpu.configgrpc's one channel policy on
    # grpcio; no HTTP/2 stack of the agent's own remains.
    modules = modules_after(
        "import asyncio\n"
        "from otelgpu.exporters.otlp.config import OtlpExporterConfig\n"
        "from otelgpu.exporters.otlp.grpc_client import GrpcTransport\n"
        "from otelgpu.processors.container_env.containerd import ContainerdRuntime\n"
        "from otelgpu.processors.k8s_attributes.pod_resources import GrpcPodResourcesClient\n"
        "async def main():\n"
        "    t = GrpcTransport(OtlpExporterConfig(endpoint='127.0.0.1:1', tls={'insecure': True}))\n"
        "    await t.open()\n"
        "    await t.close()\n"
        "    ContainerdRuntime('/nonexistent', 'k8s.io', 1.0)\n"
        "    GrpcPodResourcesClient('/nonexistent', timeout=1, max_receive_message_size=1)\n"
        "asyncio.run(main())"
    )
    assert {"otelgpu.configgrpc.client", "grpc.aio"} <= modules
    assert {m for m in modules if m.startswith(("otelgpu.rpc", "h2."))} == set()


# What the agent's entry point settles before the CLI imports pydantic (otelgpu/entry.py)
AS_THE_ENTRY_POINT = "from otelgpu.service import pydantic_plugins\npydantic_plugins.leave_out()\n"


def test_tempfile_is_loaded_only_for_a_client_certificate_given_as_pem_text() -> None:
    """`tempfile` (with `shutil` and `random`) is needed only to hand PEM text to `ssl`, which
    reads files; an exporter with TLS and no PEM text never loads it."""
    modules = modules_after(
        AS_THE_ENTRY_POINT + "from otelgpu.exporters.otlp.config import ClientTLSConfig\n"
        "from otelgpu.exporters.otlp.tls import ssl_context\n"
        "ssl_context(ClientTLSConfig())\n",
        without_site=True,
    )
    assert "otelgpu.exporters.otlp.tls" in modules
    assert "tempfile" not in modules


def test_a_pipeline_file_is_loaded_without_importlib_resources() -> None:
    """Only the embedded default is read as a package resource."""
    modules = modules_after(
        AS_THE_ENTRY_POINT + "from otelgpu.config import load_config\n"
        "from otelgpu.service.builtins import builtin_registry\n"
        "load_config(['otelgpu/default_pipeline.yaml'], builtin_registry())\n",
        without_site=True,
    )
    assert "otelgpu.config.schema" in modules
    assert "importlib.resources" not in modules
