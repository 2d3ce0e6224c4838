"""The process's entry point (`otelgpu` and `python -m otelgpu`): what must be settled before
any library loads, then the CLI.

SIGHUP is held first: the CLI's imports and the reading of the files take a good part of a
second, and a SIGHUP in that time must not kill the agent (`otelgpu.service.early_signals`), so
its handler is installed before anything else is imported.

gRPC's C core writes its own lines to stderr (`I1206 04:29:16.94 ... Handshake failed ...`, one
per failed TLS handshake, so one per retry), past Python's logging and so past
`--log-format json`. It reads `GRPC_VERBOSITY` once, when grpcio is imported, so it is set here,
before the CLI imports anything that imports grpcio. What such a line would say reaches the
agent anyway, as the failed call's status, and the component that made the call logs it in the
agent's format (the `otlp` exporter adds what to change when TLS meets a plaintext receiver).

pydantic's plugin loader is replaced by one that finds none, before the CLI imports pydantic
(`otelgpu.service.pydantic_plugins`): no other distribution's code runs in the agent, and the
1.2 MiB that pydantic's loader imports is not.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from otelgpu.service import early_signals, pydantic_plugins

# NONE: the C core writes nothing. An operator who sets GRPC_VERBOSITY or GRPC_TRACE is
# debugging gRPC itself: the C core then writes as those say, in gRPC's own format.
GRPC_CORE_VERBOSITY = "NONE"
GRPC_DEBUG_VARIABLES = ("GRPC_VERBOSITY", "GRPC_TRACE")


def quiet_grpc_core(environ: MutableMapping[str, str]) -> None:
    """Silences gRPC's C-core logging unless the operator asked for it."""
    if not any(name in environ for name in GRPC_DEBUG_VARIABLES):
        environ["GRPC_VERBOSITY"] = GRPC_CORE_VERBOSITY


def main() -> int:
    """The `otelgpu` console script and `python -m otelgpu`."""
    held = early_signals.hold()
    quiet_grpc_core(os.environ)
    pydantic_plugins.leave_out()
    from otelgpu.cli import main as cli_main  # imports grpcio: after the line above

    return cli_main(held=held)
