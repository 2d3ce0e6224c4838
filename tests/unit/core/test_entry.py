"""The process entry point: gRPC's C core is silenced before grpcio loads, unless the operator
asked for its lines; pydantic runs no plugins in the agent."""

from __future__ import annotations

from types import ModuleType

import pytest

from otelgpu.entry import quiet_grpc_core
from otelgpu.service import pydantic_plugins
from tests.unit.core.fresh_interpreter import modules_after


def test_grpc_core_logging_is_off_by_default() -> None:
    environ: dict[str, str] = {"PATH": "/bin"}
    quiet_grpc_core(environ)
    assert environ == {"PATH": "/bin", "GRPC_VERBOSITY": "NONE"}


@pytest.mark.parametrize("asked", [{"GRPC_VERBOSITY": "DEBUG"}, {"GRPC_TRACE": "http"}])
def test_an_operator_debugging_grpc_keeps_what_they_asked_for(asked: dict[str, str]) -> None:
    environ = dict(asked)
    quiet_grpc_core(environ)
    assert environ == asked


def test_the_agent_loads_no_pydantic_plugins_nor_what_their_loader_imports() -> None:
    """pydantic's plugin loader imports importlib.metadata (with email, zipfile, csv,
    calendar: 1.2 MiB resident) and runs every installed distribution's pydantic entry point;
    the agent's entry point puts a loader that finds none in its place."""
    modules = modules_after(
        "sys.argv = ['otelgpu', 'validate', '-c', 'otelgpu/default_pipeline.yaml']\n"
        "from otelgpu.entry import main\n"
        "assert main() == 0\n"
        "assert sys.modules['pydantic.plugin._loader'].get_plugins() == ()\n",
        without_site=True,
    )
    assert {"pydantic", "otelgpu.config.schema"} <= modules  # the pipeline was validated
    assert not {"importlib.metadata", "email", "zipfile"} & modules


def test_the_plugin_loader_is_put_in_place_of_pydantics_own() -> None:
    modules: dict[str, ModuleType] = {}
    pydantic_plugins.leave_out(modules)
    assert list(modules) == [pydantic_plugins.LOADER]
    assert modules[pydantic_plugins.LOADER].get_plugins() == ()


def test_a_plugin_loader_pydantic_has_loaded_already_is_left_as_it_is() -> None:
    loaded = ModuleType(pydantic_plugins.LOADER)
    modules = {pydantic_plugins.LOADER: loaded}
    pydantic_plugins.leave_out(modules)
    assert modules == {pydantic_plugins.LOADER: loaded}
