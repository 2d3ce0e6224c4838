"""The process entry point: gRPC's C core is silenced before grpcio loads, unless the operator
asked for its lines."""

from __future__ import annotations

import pytest

from otelgpu.entry import quiet_grpc_core


def test_grpc_core_logging_is_off_by_default() -> None:
    environ: dict[str, str] = {"PATH": "/bin"}
    quiet_grpc_core(environ)
    assert environ == {"PATH": "/bin", "GRPC_VERBOSITY": "NONE"}


@pytest.mark.parametrize("asked", [{"GRPC_VERBOSITY": "DEBUG"}, {"GRPC_TRACE": "http"}])
def test_an_operator_debugging_grpc_keeps_what_they_asked_for(asked: dict[str, str]) -> None:
    environ = dict(asked)
    quiet_grpc_core(environ)
    assert environ == asked
