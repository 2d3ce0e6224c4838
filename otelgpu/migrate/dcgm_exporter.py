"""`otelgpu migrate dcgm-exporter`: dcgm-exporter's settings as a pipeline file and chart values.

What dcgm-exporter was told comes from its command line, its environment (this process's, or
with `--values` the environment its Helm chart gives the container) and its chart values. Each
flag given becomes the otelgpu option that does the same, or a comment saying why there is
none. The pipeline serves dcgm-exporter's names (`naming: dcgm`), so dashboards and alerts keep
working; the chart values are those of otelgpu's chart.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from otelgpu.migrate.dcgm_chart import chart_command, chart_values
from otelgpu.migrate.dcgm_flags import NODE_NAME_ENV, parse_args, parse_env
from otelgpu.migrate.dcgm_pipeline import Builder
from otelgpu.migrate.dcgm_render import Migration, render

__all__ = ["Migration", "environment", "migrate", "render"]


def migrate(
    argv: Sequence[str],
    environ: Mapping[str, str],
    values: Mapping[str, Any] | None = None,
    read_text: Any = None,
) -> Migration:
    """The migration of dcgm-exporter run with `argv` in `environ` (or, with chart `values`,
    as its chart runs it: its arguments and env, then `argv`). ValueError on a command line or
    value dcgm-exporter would refuse. `read_text(path)` reads a file it names (the counters
    CSV, the web config); None when it cannot be read here."""
    reader = read_text or _read_text
    chart_extra: dict[str, Any] = {}
    chart_notes: list[str] = []
    if values is not None:
        chart_argv, environ = chart_command(values)
        argv = [*chart_argv, *argv]
        chart_values(values, chart_extra, chart_notes)
    given, unknown_env = parse_env(environ)
    given.update(parse_args(argv))
    builder = Builder(given, reader, values)
    migration = builder.build()
    for name in unknown_env:
        migration.comments.append(f"${name}: not a variable dcgm-exporter reads; ignored")
    if NODE_NAME_ENV in environ or values is not None:
        migration.comments.append(
            f"${NODE_NAME_ENV}: read as is (the Kubernetes node name for the Hostname label)"
        )
    _merge(migration.chart, chart_extra)
    migration.chart_comments.extend(chart_notes)
    return migration


def _merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return None


def environment() -> dict[str, str]:
    """This process's environment (a seam for tests)."""
    return dict(os.environ)
