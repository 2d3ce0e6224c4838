"""The `otelgpu` command: run, validate, components, print-config.

The only module that exits the process. Exit codes: 0 clean stop or valid config,
2 invalid config (nothing started), 1 fatal runtime error (a component failed to start).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from otelgpu import __version__, logs
from otelgpu.builtins import builtin_registry
from otelgpu.component import Kind
from otelgpu.config import load_config
from otelgpu.config.render import render
from otelgpu.errors import ConfigError, StartError
from otelgpu.registry import Registry
from otelgpu.service.agent import Agent

EXIT_OK, EXIT_FATAL, EXIT_CONFIG = 0, 1, 2
_log = logging.getLogger("otelgpu.cli")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `otelgpu` console script and `python -m otelgpu`."""
    args = _parser().parse_args(argv)
    registry = builtin_registry()
    if args.command == "components":
        print(_components_table(registry))
        return EXIT_OK
    try:
        config = load_config(args.config, registry, args.set)
    except ConfigError as exc:
        print(f"otelgpu: invalid configuration ({len(exc.issues)} issues):", file=sys.stderr)
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    if args.command == "validate":
        print(f"configuration is valid: {len(config.pipelines)} pipelines")
        return EXIT_OK
    if args.command == "print-config":
        print(render(config), end="")
        return EXIT_OK
    return _run(args, registry, config)


def _run(args: argparse.Namespace, registry: Registry, config: object) -> int:
    logs.configure()
    source = ", ".join(args.config) if args.config else "the embedded default pipeline"
    _log.info("otelgpu %s starting with %s", __version__, source)
    agent = Agent(lambda: load_config(args.config, registry, args.set), registry)
    try:
        asyncio.run(agent.run(config))  # type: ignore[arg-type]
    except StartError as exc:
        _log.error("%s", exc)
        return EXIT_FATAL
    _log.info("stopped")
    return EXIT_OK


def _components_table(registry: Registry) -> str:
    lines = []
    for kind in Kind:
        lines.append(f"{kind.section}:")
        for factory in registry:
            if factory.kind is kind:
                lines.append(
                    f"  {factory.type:<16} {factory.stability.value:<12} {factory.description}"
                )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otelgpu", description="GPU metrics agent for Kubernetes nodes"
    )
    parser.add_argument("--version", action="version", version=f"otelgpu {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    helps = {
        "run": "run the pipelines (the embedded default pipeline without -c)",
        "validate": "load and check the configuration; start nothing",
        "print-config": "print the resolved configuration, secrets redacted",
    }
    for name, help_text in helps.items():
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument(
            "-c",
            "--config",
            action="append",
            default=[],
            metavar="FILE",
            help="pipeline file; repeat to merge several in order (later keys win)",
        )
        cmd.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY.PATH=VALUE",
            help="override one key, e.g. receivers.nvml.collection_interval=5s",
        )
    sub.add_parser("components", help="list component types by kind, with stability")
    return parser
