"""The `otelgpu` command: run, validate, components, print-config, migrate.

The only module that exits the process. Exit codes: 0 clean stop or valid config,
2 invalid config (nothing started), 1 fatal runtime error (a component failed to start).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import replace

import yaml

from otelgpu import __version__
from otelgpu.component.component import Kind
from otelgpu.component.errors import ConfigError, Issue, StartError
from otelgpu.component.registry import Registry
from otelgpu.config import AgentConfig, load_config
from otelgpu.config.render import render
from otelgpu.service import logs
from otelgpu.service.agent import Agent
from otelgpu.service.builtins import builtin_registry
from otelgpu.service.cpu_limit import cpu_limit, cpu_limit_note
from otelgpu.service.early_signals import HeldSignals

EXIT_OK, EXIT_FATAL, EXIT_CONFIG = 0, 1, 2
_log = logging.getLogger("otelgpu.cli")


def main(argv: Sequence[str] | None = None, *, held: HeldSignals | None = None) -> int:
    """The CLI, behind the `otelgpu` console script and `python -m otelgpu` (`__main__.py`),
    which hold SIGHUP before anything else (`held`; without it, SIGHUP keeps its default until
    the agent runs)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["migrate"]:
        return _migrate(argv[1:])
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    intervals = _collect_intervals(args)
    if intervals:
        _refuse_interval(parser, args, intervals, unknown)
    if unknown:
        _refuse(parser, args, unknown)
    registry = builtin_registry()
    if args.command == "components":
        print(_components_table(registry))
        return EXIT_OK
    logs.hold()  # what loading logs is written once the config says how (JSON from line one)
    try:
        config = _load(args, registry)
    except ConfigError as exc:
        logs.configure(args.log_level or "info", args.log_format or "console")
        _report(args, exc)
        return EXIT_CONFIG
    except BaseException:  # a bug: what was logged while loading still comes out
        logs.configure(args.log_level or "info", args.log_format or "console")
        raise
    settings = config.telemetry.logs
    logs.configure(settings.level, settings.encoding)
    if args.command == "validate":
        count = len(config.pipelines)
        print(f"configuration is valid: {count} pipeline{'' if count == 1 else 's'}")
        for line in _notes(config):
            print(line)
        return EXIT_OK
    if args.command == "print-config":
        print(render(config), end="")
        return EXIT_OK
    return _run(args, registry, config, held or HeldSignals())


def _refuse(parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]) -> None:
    """Exits on arguments otelgpu does not take, pointing dcgm-exporter's flags to `migrate`."""
    from otelgpu.migrate.dcgm_flags import flag_names

    theirs = flag_names(unknown)
    if theirs:
        parser.exit(
            EXIT_CONFIG,
            f"otelgpu {args.command}: {', '.join(theirs)}: dcgm-exporter's flag"
            f"{'s' if len(theirs) > 1 else ''}, not otelgpu's. `otelgpu migrate dcgm-exporter "
            f"{' '.join(unknown)}` writes the pipeline file that does the same "
            "(docs/migrating-from-dcgm-exporter.md, section 2).\n",
        )
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")


def _collect_intervals(args: argparse.Namespace) -> list[str]:
    """The `-c` values that read as dcgm-exporter's `-c` (its collect interval, in ms): a
    number that names no file. A file of that name is a pipeline file like any other."""
    given: list[str] = getattr(args, "config", [])
    return [path for path in given if path.isdigit() and not os.path.exists(path)]


def _refuse_interval(
    parser: argparse.ArgumentParser, args: argparse.Namespace, intervals: list[str], rest: list[str]
) -> None:
    """Exits on `-c 1000`, dcgm-exporter's collect interval where the pipeline file goes,
    pointing to the `migrate` command that turns it (and its other flags) into a pipeline."""
    first = intervals[0]
    theirs = " ".join([f"-c {intervals[-1]}", *rest])  # its last -c wins, as there
    parser.exit(
        EXIT_CONFIG,
        f"otelgpu {args.command}: -c {first}: dcgm-exporter's -c is its collect interval in "
        f"milliseconds; otelgpu's -c names the pipeline file, and there is no file {first}. "
        f"`otelgpu migrate dcgm-exporter {theirs}` writes the pipeline file that does the same "
        "(docs/migrating-from-dcgm-exporter.md, section 2).\n",
    )


def _migrate(argv: list[str]) -> int:
    """`otelgpu migrate dcgm-exporter [--values FILE] [--chart-values FILE] [ARGS...]`."""
    from otelgpu.migrate import dcgm_exporter

    usage = (
        "usage: otelgpu migrate dcgm-exporter [--values FILE] [--chart-values FILE] "
        "[DCGM-EXPORTER FLAGS...]\n"
        "Turns dcgm-exporter's flags and DCGM_EXPORTER_* environment (or, with --values, its "
        "Helm chart values) into an otelgpu pipeline file (stdout) and otelgpu chart values "
        "(--chart-values FILE)."
    )
    if argv[:1] != ["dcgm-exporter"] or argv[1:2] in (["-h"], ["--help"]):
        print(usage, file=sys.stdout if argv[1:2] in (["-h"], ["--help"]) else sys.stderr)
        return EXIT_OK if argv[1:2] in (["-h"], ["--help"]) else EXIT_CONFIG
    ours, theirs = _own_options(argv[1:], ("--values", "--chart-values"))
    try:
        values = None
        if "--values" in ours:
            with open(ours["--values"], encoding="utf-8") as f:
                values = yaml.safe_load(f) or {}
            if not isinstance(values, dict):
                raise ValueError(f"{ours['--values']}: expected a mapping of chart values")
        migration = dcgm_exporter.migrate(theirs, dcgm_exporter.environment(), values)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"otelgpu migrate dcgm-exporter: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    pipeline, chart = dcgm_exporter.render(migration)
    print(pipeline, end="")
    if "--chart-values" in ours:
        with open(ours["--chart-values"], "w", encoding="utf-8") as f:
            f.write(chart)
    else:
        print(
            "otelgpu migrate: chart values not written (add --chart-values FILE)", file=sys.stderr
        )
    return EXIT_OK


def _own_options(argv: list[str], names: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """`--name VALUE` / `--name=VALUE` options of ours pulled out of `argv`; the rest."""
    ours: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        name, has_value, value = argv[i].partition("=")
        if name in names:
            if not has_value:
                i += 1
                if i >= len(argv):
                    raise SystemExit(f"otelgpu migrate: {name} needs a FILE")
                value = argv[i]
            ours[name] = value
        else:
            rest.append(argv[i])
        i += 1
    return ours, rest


def _load(args: argparse.Namespace, registry: Registry) -> AgentConfig:
    """The configuration, with `--log-level`/`--log-format` in place of what it says (on every
    reload too)."""
    csv = [path for path in args.config if path.lower().endswith(".csv")]
    if csv:  # dcgm-exporter's counters file where the pipeline file goes
        raise ConfigError(
            [
                Issue(
                    path, 1, 1, (),
                    "a counters CSV is not a pipeline file: name it in the nvml receiver "
                    f"(receivers::nvml::counters_csv: {path}); `otelgpu migrate dcgm-exporter "
                    f"-f {path}` writes a pipeline file that does",
                )
                for path in csv
            ]
        )  # fmt: skip
    config = load_config(args.config, registry, args.set)
    update = {"level": args.log_level, "encoding": args.log_format}
    update = {k: v for k, v in update.items() if v}
    if update:
        telemetry = config.telemetry
        logs_config = telemetry.logs.model_copy(update=update)
        config = replace(config, telemetry=telemetry.model_copy(update={"logs": logs_config}))
    return config


def _notes(config: AgentConfig) -> list[str]:
    """What each component's config asks for that cannot be done as asked (`config_notes`)."""
    return [
        f'{kind.value} "{cid}": {note}'
        for kind, components in config.components.items()
        for cid, model in components.items()
        for note in getattr(model, "config_notes", tuple)()
    ]


def _report(args: argparse.Namespace, exc: ConfigError) -> None:
    """Config issues: as JSON log records when `run` logs JSON, otherwise as compiler lines."""
    if args.command == "run" and args.log_format == "json":
        for issue in exc.issues:
            _log.error("invalid configuration: %s", issue)
        return
    count = len(exc.issues)
    noun = "issue" if count == 1 else "issues"
    print(f"otelgpu: invalid configuration ({count} {noun}):", file=sys.stderr)
    print(str(exc), file=sys.stderr)


def _run(
    args: argparse.Namespace, registry: Registry, config: AgentConfig, held: HeldSignals
) -> int:
    source = ", ".join(args.config) if args.config else "the embedded default pipeline"
    _log.info("otelgpu %s starting with %s", __version__, source)
    note = cpu_limit_note(cpu_limit())
    if note:
        _log.info("%s", note)
    agent = Agent(lambda: _load(args, registry), registry, held=held)
    try:
        asyncio.run(agent.run(config))
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
    parser.add_argument("-V", "--version", action="version", version=f"otelgpu {__version__}")
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
        cmd.add_argument(
            "--log-level",
            type=str.lower,
            choices=list(logs.LEVELS),
            help="the agent's log level, over service::telemetry::logs::level",
        )
        cmd.add_argument(
            "--log-format",
            choices=logs.ENCODINGS,
            help="console or json, over service::telemetry::logs::encoding",
        )
    sub.add_parser("components", help="list component types by kind, with stability")
    sub.add_parser(
        "migrate",
        help="dcgm-exporter's flags, environment or chart values as an otelgpu pipeline "
        "(otelgpu migrate dcgm-exporter --help)",
    )
    return parser
